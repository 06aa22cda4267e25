// The API group every Runlet resource lives in. Projects are namespaces, so both kinds are namespaced.

export const RUNLET_GROUP = 'runlet.dev';
export const RUNLET_VERSION = 'v1alpha1';
export const RUNLET_API_VERSION = `${RUNLET_GROUP}/${RUNLET_VERSION}` as const;

export const APP_KIND = 'App';
export const APP_PLURAL = 'apps';
export const RUNLOG_KIND = 'RunLog';
export const RUNLOG_PLURAL = 'runlogs';

/** Label every object of an App carries, RunLogs included, its value the App's name: the operator, the management API and the sidecars select by it. */
export const APP_LABEL = 'runlet.dev/app';
