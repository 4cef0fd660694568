import type { EndpointStore, JobStore, KeyStore, RegistryCredentialStore, Store, UpkeepStore, UsageStore, WorkerStore } from './store.js';
import type { FileStore } from './file-store.js';
import type { LogStore } from './log-store.js';
import type { MinuteStore } from './minute-store.js';
import type { AuditStore } from './audit-store.js';

/** What a backend builds a Store from: one part a table group, and its own migrate and close. */
export interface StoreParts {
  kind: Store['kind'];
  jobs: JobStore;
  workers: WorkerStore;
  endpoints: EndpointStore;
  keys: KeyStore;
  registry: RegistryCredentialStore;
  usage: UsageStore;
  minutes: MinuteStore;
  logs: LogStore;
  upkeep: UpkeepStore;
  audit: AuditStore;
  files: FileStore;
  migrate(): Promise<void>;
  close(): Promise<void>;
}

/**
 * One Store whose every method is its part's: each table group is implemented apart (sqlite/,
 * postgres/) and the store callers see is assembled here, the same way for every backend.
 * Plain forwarding arrows (no spread, no bind): V8 inlines them on the hot path.
 *
 * @example composeStore({ kind: 'sqlite', jobs, workers, endpoints, keys, registry, usage, minutes, migrate, close })
 */
export function composeStore(parts: StoreParts): Store {
  const { jobs, workers, endpoints, keys, usage } = parts;
  return {
    kind: parts.kind,
    migrate: () => parts.migrate(),
    close: () => parts.close(),

    insertJob: (args) => jobs.insertJob(args),
    getJob: (id) => jobs.getJob(id),
    getJobInput: (id) => jobs.getJobInput(id),
    findIdempotentJob: (keyDigest) => jobs.findIdempotentJob(keyDigest),
    insertJobOnce: (args) => jobs.insertJobOnce(args),
    claimJobs: (args) => jobs.claimJobs(args),
    claimJobsFor: (args) => jobs.claimJobsFor(args),
    finishJob: (args) => jobs.finishJob(args),
    setProgress: (args) => jobs.setProgress(args),
    cancelJob: (args) => jobs.cancelJob(args),
    purgeQueue: (args) => jobs.purgeQueue(args),
    retryJob: (args) => jobs.retryJob(args),
    timeOutRunning: (args) => jobs.timeOutRunning(args),
    expireQueued: (args) => jobs.expireQueued(args),
    requeueJobs: (args) => jobs.requeueJobs(args),
    deleteExpired: (args) => jobs.deleteExpired(args),
    shortenRetention: (args) => jobs.shortenRetention(args),
    appendStream: (args) => jobs.appendStream(args),
    readStream: (args) => jobs.readStream(args),
    deleteStream: (args) => jobs.deleteStream(args),
    peekStream: (args) => jobs.peekStream(args),
    countJobs: (endpointId) => jobs.countJobs(endpointId),
    queueStats: (args) => jobs.queueStats(args),
    queueByKey: (args) => jobs.queueByKey(args),
    listJobs: (args) => jobs.listJobs(args),
    jobStates: (ids) => jobs.jobStates(ids),
    dueWebhooks: (args) => jobs.dueWebhooks(args),
    markWebhook: (args) => jobs.markWebhook(args),
    redeliverWebhook: (args) => jobs.redeliverWebhook(args),
    listWebhookAttempts: (id) => jobs.listWebhookAttempts(id),

    touchWorker: (args) => workers.touchWorker(args),
    listWorkers: (endpointId) => workers.listWorkers(endpointId),
    findStaleWorkers: (cutoff) => workers.findStaleWorkers(cutoff),
    deleteWorkers: (ids) => workers.deleteWorkers(ids),
    jobsHeldBy: (workerId) => workers.jobsHeldBy(workerId),

    ...endpointMethods(endpoints),

    createKey: (key) => keys.createKey(key),
    listKeys: () => keys.listKeys(),
    deleteKey: (id) => keys.deleteKey(id),
    getKeyByHash: (hash) => keys.getKeyByHash(hash),
    countKeysWithScope: (scope) => keys.countKeysWithScope(scope),
    getKey: (id) => keys.getKey(id),
    updateKeyLimits: (args) => keys.updateKeyLimits(args),
    touchKey: (args) => keys.touchKey(args),

    ...registryMethods(parts.registry),
    ...usageMethods(usage),
    ...minuteMethods(parts.minutes),
    ...logMethods(parts.logs),
    ...fileMethods(parts.files),
    ...auditMethods(parts.audit),
    probeWrite: (now) => parts.upkeep.probeWrite(now),
  };
}

/** The endpoints' methods, as plain forwarding arrows like the rest. */
function endpointMethods(endpoints: EndpointStore): EndpointStore {
  return {
    createEndpoint: (endpoint) => endpoints.createEndpoint(endpoint),
    getEndpoint: (id) => endpoints.getEndpoint(id),
    listEndpoints: () => endpoints.listEndpoints(),
    updateEndpoint: (endpoint) => endpoints.updateEndpoint(endpoint),
    deleteEndpoint: (id) => endpoints.deleteEndpoint(id),
  };
}

/** The worker logs' methods (worker_logs), as plain forwarding arrows like the rest. */
function logMethods(logs: LogStore): LogStore {
  return {
    appendLogs: (lines) => logs.appendLogs(lines),
    readLogs: (query) => logs.readLogs(query),
    lastLogId: () => logs.lastLogId(),
    deleteLogsBefore: (args) => logs.deleteLogsBefore(args),
    trimEndpointLogs: (args) => logs.trimEndpointLogs(args),
  };
}

/** The meters' methods (job_meters, worker_meters), as plain forwarding arrows like the rest. */
function usageMethods(usage: UsageStore): UsageStore {
  return {
    recordJobMeter: (meter) => usage.recordJobMeter(meter),
    sumUsage: (args) => usage.sumUsage(args),
    keySpend: (args) => usage.keySpend(args),
    listJobMeters: (jobId) => usage.listJobMeters(jobId),
    countWorkerRuns: (args) => usage.countWorkerRuns(args),
    countLiveJobs: (keyId) => usage.countLiveJobs(keyId),
    openWorkerMeter: (meter) => usage.openWorkerMeter(meter),
    advanceWorkerMeters: (args) => usage.advanceWorkerMeters(args),
    closeWorkerMeter: (args) => usage.closeWorkerMeter(args),
    listWorkerMeters: (args) => usage.listWorkerMeters(args),
    recordColdStart: (args) => usage.recordColdStart(args),
    readColdStarts: (endpointId) => usage.readColdStarts(endpointId),
  };
}

/** The registry credentials' methods, as plain forwarding arrows like the rest. */
function registryMethods(registry: RegistryCredentialStore): RegistryCredentialStore {
  return {
    createRegistryCredential: (credential) => registry.createRegistryCredential(credential),
    listRegistryCredentials: () => registry.listRegistryCredentials(),
    getRegistryCredential: (id) => registry.getRegistryCredential(id),
    deleteRegistryCredential: (id) => registry.deleteRegistryCredential(id),
  };
}

/** The audit log's methods, as plain forwarding arrows like the rest. */
function auditMethods(audit: AuditStore): AuditStore {
  return {
    appendAudit: (entry) => audit.appendAudit(entry),
    listAudit: (query) => audit.listAudit(query),
    deleteAuditBefore: (args) => audit.deleteAuditBefore(args),
  };
}

/** The files' methods (the image endpoints' files in the database), as plain forwarding arrows like the rest. */
function fileMethods(files: FileStore): FileStore {
  return {
    putFile: (args) => files.putFile(args),
    fileInfo: (key) => files.fileInfo(key),
    readFile: (args) => files.readFile(args),
    deleteFilesBefore: (args) => files.deleteFilesBefore(args),
  };
}

/** The per-minute aggregates' methods, as plain forwarding arrows like the rest. */
function minuteMethods(minutes: MinuteStore): MinuteStore {
  return {
    addMinutes: (deltas) => minutes.addMinutes(deltas),
    readMinutes: (args) => minutes.readMinutes(args),
    deleteMinutesBefore: (args) => minutes.deleteMinutesBefore(args),
  };
}
