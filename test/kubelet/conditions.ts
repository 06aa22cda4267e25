// Status conditions whose timestamps move only when something changed: lastTransitionTime when the
// status flips, lastUpdateTime when status, reason or message change. Rewriting a status that did not
// change therefore yields the same object, and the kubelet writes nothing.

export type ConditionStatus = 'True' | 'False' | 'Unknown';

export interface TimedCondition {
  type: string;
  status: ConditionStatus;
  reason?: string;
  message?: string;
  lastTransitionTime: string;
  lastUpdateTime: string;
}

export class ConditionClock {
  readonly #last = new Map<string, TimedCondition>();

  condition(type: string, status: ConditionStatus, reason?: string, message?: string): TimedCondition {
    const previous = this.#last.get(type);
    const now = new Date().toISOString();
    const next: TimedCondition = {
      type,
      status,
      lastTransitionTime: previous !== undefined && previous.status === status ? previous.lastTransitionTime : now,
      lastUpdateTime:
        previous !== undefined && previous.status === status && previous.reason === reason && previous.message === message
          ? previous.lastUpdateTime
          : now,
    };
    if (reason !== undefined) next.reason = reason;
    if (message !== undefined) next.message = message;
    this.#last.set(type, next);
    return next;
  }
}
