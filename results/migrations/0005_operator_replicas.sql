-- The operator replicas using this store, each marking itself present every few seconds
-- (operator/replica-presence.ts). A replica writes some runs itself: a call held at zero and cancelled, which
-- no App pod saw, recorded with its webhook pending while that replica delivers it. The leader's sweep leaves
-- such a webhook to the replica while the replica is seen, and closes it as not delivered once it is not
-- (operator/results-upkeep.ts), as it closes the runs of a pod that is gone. One row per replica; a row not
-- seen for a day is dropped by the next replica to mark itself.
CREATE TABLE runlet_operator_replicas (
  identity text PRIMARY KEY,
  seen_at timestamptz NOT NULL
);
