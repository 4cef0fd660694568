import { DEFAULT_STREAM_WAIT_MS, DEFAULT_SYNC_WAIT_MS } from '../http/client-routes.js';
import { DEFAULT_LOG_LINES, MAX_LOG_LINES } from '../http/pool-routes.js';
import { DEFAULT_LOG_PAGE, MAX_LOG_PAGE } from '../http/log-routes.js';
import { IDEMPOTENCY_KEY_MAX_LENGTH } from '../http/idempotency.js';
import { MAX_BUDGET_USD, MAX_CONCURRENT_JOBS } from '../http/admin-routes.js';
import { MAX_AUDIT_PAGE } from '../http/audit-routes.js';
import { BOOLEAN_FIELDS, ENDPOINT_DEFAULTS, INTEGER_FIELDS, MAX_PRICE_PER_SECOND_USD, MAX_RATE, RATE_LIMITED_OPERATIONS } from '../jobs/endpoint-settings.js';
import { POLICY_LIMITS } from '../jobs/policy.js';
import { SCOPES } from '../security/keys.js';
import { REGISTRY_CREDENTIAL_LIMITS } from '../security/registry-credentials.js';

type Schema = Record<string, unknown>;
type Operation = Record<string, unknown>;

const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: Schema, description = 'OK') => ({ description, content: { 'application/json': { schema } } });
const pathParam = (name: string, description: string) => ({ name, in: 'path', required: true, description, schema: { type: 'string' } });
const intQuery = (name: string, description: string, min: number, max: number, def?: number) => ({
  name,
  in: 'query',
  required: false,
  description,
  schema: { type: 'integer', minimum: min, maximum: max, ...(def === undefined ? {} : { default: def }) },
});
const ERRORS = { '400': json(ref('Error'), 'Bad input: `field` names it'), '401': json(ref('Error'), 'Missing, unknown or insufficient key'), '404': json(ref('Error'), 'Not found') };

/** An endpoint's `rateLimits`: "off", or operations → {per10s?, concurrent?} or "off"; null restores the defaults. */
function rateLimitsSchema(): Schema {
  const off = { type: 'string', enum: ['off'] };
  const count = { type: 'integer', minimum: 1, maximum: MAX_RATE };
  const rate = { oneOf: [off, { type: 'object', additionalProperties: false, properties: { per10s: count, concurrent: count } }] };
  return {
    oneOf: [off, { type: 'object', additionalProperties: false, properties: Object.fromEntries(RATE_LIMITED_OPERATIONS.map((op) => [op, rate])) }],
    nullable: true,
    description: 'This endpoint\'s rate limits over the defaults (docs/configuration.md): "off" lifts them all; an object changes the operations named; null restores the defaults',
  };
}

/** `pricePerSecond` of an endpoint (endpoint-settings.ts). */
const PRICE_PER_SECOND: Schema = {
  oneOf: [{ type: 'number', minimum: 0, maximum: MAX_PRICE_PER_SECOND_USD }, { type: 'string', pattern: '^\\d+(\\.\\d{1,10})?$' }],
  nullable: true,
  description: 'USD per second of execution (at most 10 decimals); null: metered, not priced',
};

/** The budget and job cap of PATCH /admin/v1/keys/{key} (admin-routes.ts). */
const KEY_LIMITS: Record<string, Schema> = {
  budgetUsd: { oneOf: [{ type: 'number', minimum: 0, maximum: MAX_BUDGET_USD }, { type: 'string' }], nullable: true, description: 'USD per budgetPeriod; null: no budget' },
  budgetPeriod: { type: 'string', enum: ['day', 'month'], nullable: true, description: 'UTC calendar day or month' },
  maxConcurrentJobs: { type: 'integer', minimum: 1, maximum: MAX_CONCURRENT_JOBS, nullable: true, description: 'queued + running jobs at once; null: no cap' },
};

/** EndpointSettings (what a create or update may send) and Endpoint (what the admin API answers), with RateLimits. */
function endpointSchemas(integerSettings: Record<string, Schema>, worker: Schema): Record<string, Schema> {
  const booleanSettings = Object.fromEntries(BOOLEAN_FIELDS.map((field) => [field, { type: 'boolean', default: (ENDPOINT_DEFAULTS as Record<string, unknown>)[field] }]));
  return {
    RateLimits: rateLimitsSchema(),
    EndpointSettings: {
      type: 'object',
      additionalProperties: false,
      properties: {
        id: { type: 'string' },
        name: { type: 'string' },
        scalerType: { type: 'string', enum: ['QUEUE_DELAY', 'REQUEST_COUNT'], default: ENDPOINT_DEFAULTS.scalerType },
        webhookSecret: { type: 'string', nullable: true, description: 'Standard Webhooks secret (whsec_…); null removes it' },
        worker,
        rateLimits: ref('RateLimits'),
        pricePerSecond: PRICE_PER_SECOND,
        ...integerSettings,
        ...booleanSettings,
      },
    },
    Endpoint: {
      type: 'object',
      properties: {
        id: { type: 'string' },
        name: { type: 'string' },
        scalerType: { type: 'string' },
        webhookSigning: { type: 'boolean', description: 'Whether a webhook secret is set (the secret is never shown)' },
        worker,
        rateLimits: ref('RateLimits'),
        pricePerSecond: PRICE_PER_SECOND,
        createdAt: { type: 'string', format: 'date-time' },
        updatedAt: { type: 'string', format: 'date-time' },
        ...integerSettings,
        ...booleanSettings,
      },
    },
  };
}

/** The schemas, their bounds taken from the constants the validators use (policy.ts, endpoint-settings.ts, keys.ts). */
function schemas(): Record<string, Schema> {
  const integerSettings = Object.fromEntries(
    Object.entries(INTEGER_FIELDS).map(([field, [min, max]]) => [field, { type: 'integer', minimum: min, maximum: max, default: (ENDPOINT_DEFAULTS as Record<string, unknown>)[field] }]),
  );
  const worker = { oneOf: [{ type: 'string' }, { type: 'object', description: 'A command worker {command, env?, cwd?} or an image worker {image, command?, env?, gpus?, gpuTypes?, memoryMb?, volumes?, registryCredentials?, prepull?}' }], nullable: true };
  const text = (max: number) => ({ type: 'string', minLength: 1, maxLength: max });
  return {
    Error: { type: 'object', required: ['error', 'code'], properties: { error: { type: 'string' }, code: { type: 'string' }, field: { type: 'string' } } },
    Policy: {
      type: 'object',
      additionalProperties: false,
      properties: {
        executionTimeout: { type: 'integer', exclusiveMinimum: POLICY_LIMITS.minExecutionTimeoutMs, maximum: POLICY_LIMITS.maxExecutionTimeoutMs, description: 'ms; default: the endpoint\'s executionTimeoutMs' },
        lowPriority: { type: 'boolean', default: false },
        ttl: { type: 'integer', minimum: POLICY_LIMITS.minTtlMs, maximum: POLICY_LIMITS.maxTtlMs, default: POLICY_LIMITS.defaultTtlMs },
      },
    },
    S3Config: { type: 'object', additionalProperties: false, required: ['accessId', 'accessSecret', 'bucketName', 'endpointUrl'], properties: Object.fromEntries(['accessId', 'accessSecret', 'bucketName', 'endpointUrl'].map((k) => [k, { type: 'string' }])) },
    SubmitBody: { type: 'object', additionalProperties: false, required: ['input'], properties: { input: { type: 'object' }, webhook: { type: 'string', format: 'uri' }, policy: ref('Policy'), s3Config: ref('S3Config') } },
    JobRef: { type: 'object', required: ['id', 'status'], properties: { id: { type: 'string' }, status: ref('JobStatus') } },
    JobStatus: { type: 'string', enum: ['IN_QUEUE', 'IN_PROGRESS', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'] },
    Job: {
      type: 'object',
      required: ['id', 'status'],
      properties: { id: { type: 'string' }, status: ref('JobStatus'), delayTime: { type: 'integer' }, executionTime: { type: 'integer' }, workerId: { type: 'string' }, retries: { type: 'integer', description: 'times a client retried the job (/retry)' }, attempts: { type: 'integer', description: 'hand-outs to workers since the submit or the last /retry' }, input: {}, output: {}, error: {} },
    },
    ...endpointSchemas(integerSettings, worker),
    OpenAiError: {
      type: 'object',
      required: ['error'],
      properties: { error: { type: 'object', properties: { message: { type: 'string' }, type: { type: 'string' }, param: { type: 'string', nullable: true }, code: { type: 'string' } } } },
    },
    RegistryCredentialSpec: {
      type: 'object',
      additionalProperties: false,
      required: ['name', 'username', 'password'],
      properties: { name: text(REGISTRY_CREDENTIAL_LIMITS.name), username: text(REGISTRY_CREDENTIAL_LIMITS.username), password: { ...text(REGISTRY_CREDENTIAL_LIMITS.password), format: 'password', description: 'Sealed at rest; never answered' } },
    },
    RegistryCredential: { type: 'object', properties: { id: { type: 'string', description: 'rc_…: what worker.registryCredentials names' }, name: { type: 'string' }, username: { type: 'string' }, createdAt: { type: 'string', format: 'date-time' } } },
    KeySpec: { type: 'object', additionalProperties: false, required: ['name', 'scopes'], properties: { name: { type: 'string', minLength: 1, maxLength: 128 }, scopes: { type: 'array', minItems: 1, items: { type: 'string', enum: [...SCOPES] } }, endpoints: { type: 'array', items: { type: 'string' }, nullable: true } } },
    Key: { type: 'object', properties: { id: { type: 'string' }, name: { type: 'string' }, scopes: { type: 'array', items: { type: 'string', enum: [...SCOPES] } }, endpoints: { type: 'array', items: { type: 'string' }, nullable: true }, createdAt: { type: 'string', format: 'date-time' }, key: { type: 'string', description: 'Only in the answer that created it' }, prefix: { type: 'string', nullable: true, description: 'The key\'s first 8 characters, to recognise it by' }, lastUsedAt: { type: 'string', format: 'date-time', nullable: true, description: 'Written at most once a minute per gateway' }, managed: { type: 'boolean', description: 'A pool worker\'s own key: DELETE needs ?force=true' }, ...KEY_LIMITS, budget: { type: 'object', nullable: true, description: 'spend in the current period: budgetUsd, budgetPeriod, spentUsd, resetsAt' } } },
    KeyLimits: { type: 'object', additionalProperties: false, properties: KEY_LIMITS },
  };
}

/** The optional Idempotency-Key header of the submitting routes (docs/api.md). */
const IDEMPOTENCY_KEY_PARAM = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description: 'A retry with the same key and body answers the job the first try made (while that job is kept); another body under the key is 409 IDEMPOTENCY_KEY_REUSED. Scoped to the API key and endpoint.',
  schema: { type: 'string', minLength: 1, maxLength: IDEMPOTENCY_KEY_MAX_LENGTH },
};

function clientPaths(): Record<string, Record<string, Operation>> {
  const ep = pathParam('endpoint', 'Endpoint id');
  const job = pathParam('job', 'Job id');
  const wait = (def: number, min: number) => intQuery('wait', 'How long to wait for the job to end (ms)', min, 300_000, def);
  const op = (summary: string, params: unknown[], response: Schema, body?: Schema): Operation => ({
    tags: ['client'],
    summary,
    security: [{ bearer: [] }],
    parameters: params,
    ...(body ? { requestBody: { required: true, content: { 'application/json': { schema: body } } } } : {}),
    responses: { '200': json(response), ...ERRORS, '429': json(ref('Error'), 'Rate limited, too many concurrent requests or queue full') },
  });
  const jobOp = (summary: string, extra: unknown[] = []): Operation => op(summary, [ep, job, ...extra], ref('Job'));
  return {
    '/v2/{endpoint}/run': { post: op('Submit a job (answers at once)', [ep, IDEMPOTENCY_KEY_PARAM], ref('JobRef'), ref('SubmitBody')) },
    '/v2/{endpoint}/runsync': { post: op('Submit a job and wait for its result', [ep, wait(DEFAULT_SYNC_WAIT_MS, 1_000), IDEMPOTENCY_KEY_PARAM], ref('Job'), ref('SubmitBody')) },
    '/v2/{endpoint}/status/{job}': { get: jobOp('A job\'s status and result', [intQuery('ttl', 'Shorten the retention of the result (ms)', 1, 7 * 86_400_000)]), post: jobOp('Same as GET') },
    '/v2/{endpoint}/status-sync/{job}': { get: jobOp('Wait for a job to end, then its status', [wait(DEFAULT_SYNC_WAIT_MS, 1_000)]), post: jobOp('Same as GET') },
    '/v2/{endpoint}/stream/{job}': { get: jobOp('Stream chunks so far (JSON), or server-sent events with Accept: text/event-stream', [wait(DEFAULT_STREAM_WAIT_MS, 0)]), post: jobOp('Same as GET') },
    '/v2/{endpoint}/cancel/{job}': { post: op('Cancel a queued or running job (409 otherwise)', [ep, job], ref('JobRef')) },
    '/v2/{endpoint}/retry/{job}': { post: op('Retry a FAILED or TIMED_OUT job (409 otherwise, 410 once its result expired)', [ep, job], ref('JobRef')) },
    '/v2/{endpoint}/purge-queue': { post: op('Cancel every queued job of the endpoint', [ep], { type: 'object', properties: { removed: { type: 'integer' }, status: { type: 'string' } } }) },
    '/v2/{endpoint}/health': { get: op('Job counts and workers by state', [ep], { type: 'object', properties: { jobs: { type: 'object' }, workers: { type: 'object' } } }) },
    '/v2/{endpoint}/requests': { get: op('Recent jobs, newest first', [ep, intQuery('limit', 'How many', 1, 1000, 50)], { type: 'object', properties: { requests: { type: 'array', items: { type: 'object' } } } }) },
  };
}

/**
 * `/v2/{endpoint}/openai/v1/...` (docs/openai.md): each request is a job whose input is
 * `{openai_route, openai_input}`; the answer is the worker's output, or server-sent events with
 * `"stream": true`; errors in OpenAI's shape. Any other `POST /openai/v1/...` passes through too.
 */
function openAiPaths(): Record<string, Record<string, Operation>> {
  const ep = pathParam('endpoint', 'Endpoint id');
  const openAiError = json(ref('OpenAiError'), 'Error in OpenAI\'s shape');
  const op = (summary: string, body?: Schema): Operation => ({
    tags: ['openai'],
    summary,
    description: 'Point the official OpenAI clients at /v2/{endpoint}/openai/v1 (docs/openai.md). Needs a run-scoped key. Rate limit `openai`.',
    security: [{ bearer: [] }],
    parameters: body ? [ep, IDEMPOTENCY_KEY_PARAM] : [ep],
    ...(body ? { requestBody: { required: true, content: { 'application/json': { schema: body } } } } : {}),
    responses: {
      '200': {
        description: 'The worker\'s output; with "stream": true, server-sent events built from its stream. Header x-request-id: the job id',
        content: { 'application/json': { schema: { type: 'object' } }, ...(body ? { 'text/event-stream': { schema: { type: 'string' } } } : {}) },
      },
      ...Object.fromEntries(['400', '401', '404', '429', '500', '504'].map((code) => [code, openAiError])),
    },
  });
  const common = { model: { type: 'string' }, stream: { type: 'boolean', nullable: true } };
  return {
    '/v2/{endpoint}/openai/v1/chat/completions': {
      post: op('A chat completion from the endpoint\'s worker', { type: 'object', required: ['messages'], properties: { ...common, messages: { type: 'array', minItems: 1, items: { type: 'object' } } } }),
    },
    '/v2/{endpoint}/openai/v1/completions': {
      post: op('A text completion from the endpoint\'s worker', { type: 'object', required: ['prompt'], properties: { ...common, prompt: { oneOf: [{ type: 'string' }, { type: 'array', items: {} }] } } }),
    },
    '/v2/{endpoint}/openai/v1/models': { get: op('The models the endpoint\'s worker serves') },
  };
}

/** `/files/{key}`: an image of the local object store, through the signed link an image job's output carries. */
function filePaths(): Record<string, Record<string, Operation>> {
  const query = (name: string, description: string) => ({ name, in: 'query', required: true, description, schema: { type: 'string' } });
  const file = {
    tags: ['files'],
    summary: 'A file of the local object store (the image_url of an image job), with a valid, unexpired signature',
    description: 'No API key: the link\'s signature is the credential (HMAC-SHA256 of the key and expiry).',
    parameters: [
      { name: 'key', in: 'path', required: true, description: 'Object key: path segments of letters, digits, . _ - (slashes included, e.g. image-fast/<id>.jpeg)', schema: { type: 'string' } },
      query('expires', 'Expiry, epoch seconds'),
      query('sig', 'Signature (base64url)'),
    ],
    responses: {
      '200': { description: 'The file', content: { 'image/jpeg': { schema: { type: 'string', format: 'binary' } }, 'image/png': { schema: { type: 'string', format: 'binary' } } } },
      '403': json(ref('Error'), 'Invalid or expired signature'),
      '404': json(ref('Error'), 'No such file'),
    },
  };
  return { '/files/{key}': { get: file, head: { ...file, summary: 'Same as GET, without the body' } } };
}

function workerPaths(): Record<string, Record<string, Operation>> {
  const ep = pathParam('endpoint', 'Endpoint id');
  const worker = pathParam('worker', 'Worker id (letters, digits, ._:@-, at most 128)');
  const job = pathParam('job', 'Job id');
  const op = (summary: string, params: unknown[], body = false): Operation => ({
    tags: ['worker'],
    summary,
    description: 'The RunPod worker protocol: docs/worker-protocol.md. Needs a worker-scoped key (raw or Bearer).',
    security: [{ bearer: [] }],
    parameters: params,
    ...(body ? { requestBody: { required: true, content: { 'application/json': { schema: { type: 'object', properties: { output: {}, error: {} } } } } } } : {}),
    responses: { '200': { description: 'OK' }, '204': { description: 'No job (long-poll ended)' }, ...ERRORS },
  });
  return {
    '/v2/{endpoint}/job-take/{worker}': { get: op('Long-poll for one job', [ep, worker]) },
    '/v2/{endpoint}/job-take-batch/{worker}': { get: op('Long-poll for up to batch_size jobs', [ep, worker, intQuery('batch_size', 'Jobs to take', 1, 100, 1)]) },
    '/v2/{endpoint}/job-stop/{worker}': { get: op('Jobs this worker must stop (cancelled or timed out)', [ep, worker]) },
    '/v2/{endpoint}/ping/{worker}': { get: op('Liveness of a worker', [ep, worker]) },
    '/v2/{endpoint}/job-done/{worker}/{job}': { post: op('A job\'s result or error (or a progress update)', [ep, worker, job], true) },
    '/v2/{endpoint}/job-stream/{worker}/{job}': { post: op('Stream chunks of a running job', [ep, worker, job], true) },
  };
}

function adminPaths(): Record<string, Record<string, Operation>> {
  const op = (summary: string, params: unknown[], response: Schema, body?: Schema): Operation => ({
    tags: ['admin'],
    summary,
    security: [{ bearer: [] }],
    parameters: params,
    ...(body ? { requestBody: { required: true, content: { 'application/json': { schema: body } } } } : {}),
    responses: { '200': json(response), ...ERRORS },
  });
  const key = pathParam('key', 'Key id');
  const id = pathParam('endpoint', 'Endpoint id');
  const deleted = { type: 'object', properties: { id: { type: 'string' }, deleted: { type: 'boolean' } } };
  const time = (name: string) => ({ name, in: 'query', required: false, description: 'Epoch ms or ISO 8601', schema: { type: 'string' } });
  return {
    '/admin/v1/keys': { get: op('List API keys', [], { type: 'object', properties: { keys: { type: 'array', items: ref('Key') } } }), post: op('Create an API key (the key is in this answer only)', [], ref('Key'), ref('KeySpec')) },
    '/admin/v1/keys/{key}': { patch: op('Set an API key\'s budget and job cap', [key], ref('Key'), ref('KeyLimits')), delete: op('Revoke an API key (a managed one only with force=true: 409 KEY_MANAGED otherwise)', [key, { name: 'force', in: 'query', required: false, schema: { type: 'boolean', default: false } }], deleted) },
    '/admin/v1/registry-credentials': {
      get: op('List registry credentials (never their passwords)', [], { type: 'object', properties: { registryCredentials: { type: 'array', items: ref('RegistryCredential') } } }),
      post: op('Save a registry login endpoints pull their images with', [], { type: 'object', properties: { id: { type: 'string' }, name: { type: 'string' } } }, ref('RegistryCredentialSpec')),
    },
    '/admin/v1/registry-credentials/{credential}': { delete: op('Delete a registry credential (409 while an endpoint names it)', [pathParam('credential', 'Registry credential id (rc_…)')], deleted) },
    '/admin/v1/endpoints': { get: op('List endpoints', [], { type: 'object', properties: { endpoints: { type: 'array', items: ref('Endpoint') } } }), post: op('Create an endpoint', [], ref('Endpoint'), ref('EndpointSettings')) },
    '/admin/v1/endpoints/{endpoint}': { get: op('An endpoint', [id], ref('Endpoint')), patch: op('Change an endpoint\'s settings', [id], ref('Endpoint'), ref('EndpointSettings')), delete: op('Delete an endpoint', [id], deleted) },
    '/admin/v1/endpoints/{endpoint}/jobs/{job}/webhook': {
      post: op("Deliver a finished job's webhook once more (409 NO_WEBHOOK, WEBHOOK_PENDING, INVALID_STATE)", [id, pathParam('job', 'Job id')], { type: 'object', properties: { id: { type: 'string' }, status: { type: 'string' }, webhook: { type: 'string', enum: ['due'] } } }),
    },
    '/admin/v1/endpoints/{endpoint}/workers': { get: op('The endpoint\'s workers and Docker hosts', [id], { type: 'object' }) },
    '/admin/v1/endpoints/{endpoint}/workers/{worker}/logs': { get: op('The last lines of a pool worker\'s output', [id, pathParam('worker', 'Worker id'), intQuery('lines', 'How many lines', 1, MAX_LOG_LINES, DEFAULT_LOG_LINES)], { type: 'object' }) },
    '/admin/v1/logs': {
      get: op(
        'Stored worker log lines, newest page in order printed, filtered; follow=1 or Accept: text/event-stream follows new lines (docs/logs.md)',
        [
          ...['endpoint', 'worker', 'job', 'q', 'cursor'].map((name) => ({ name, in: 'query', required: false, schema: { type: 'string' } })),
          time('since'),
          time('until'),
          intQuery('limit', 'Lines per page', 1, MAX_LOG_PAGE, DEFAULT_LOG_PAGE),
          { name: 'follow', in: 'query', required: false, schema: { type: 'string', enum: ['1'] } },
        ],
        { type: 'object' },
      ),
    },
    '/admin/v1/usage': {
      get: op(
        'Job meters and pool worker time over [from, to), grouped by key, endpoint and/or day (JSON or CSV)',
        [
          time('from'),
          time('to'),
          { name: 'groupBy', in: 'query', required: false, description: 'key, endpoint, day, or several comma-separated (key,day)', schema: { type: 'string', default: 'endpoint' } },
          { name: 'format', in: 'query', required: false, schema: { type: 'string', enum: ['json', 'csv'], default: 'json' } },
        ],
        { type: 'object' },
      ),
    },
    '/admin/v1/audit': { get: op('The audit log: admin changes and console sign-ins, newest first (never a secret value)', auditParams(time), { type: 'object' }) },
  };
}

/** The filters of GET /admin/v1/audit (http/audit-routes.ts). */
function auditParams(time: (name: string) => Schema): Schema[] {
  const text = (name: string, description: string) => ({ name, in: 'query', required: false, description, schema: { type: 'string', maxLength: 256 } });
  return [
    text('actor', 'A key id, key name or console session reference'),
    text('action', 'An action (endpoint.update), or a prefix of one ending in a dot (endpoint.)'),
    text('target', 'The id of what was changed (endpoint, key, registry credential)'),
    time('since'),
    time('until'),
    intQuery('limit', 'Entries in the page', 1, MAX_AUDIT_PAGE, 100),
    text('cursor', 'nextCursor of the previous page'),
  ];
}

/**
 * The OpenAPI 3.0 description of the client, OpenAI, worker, admin and file routes, served at
 * `/openapi.json`. Bounds and defaults come from the constants the validators and routes
 * themselves use (POLICY_LIMITS, INTEGER_FIELDS, ENDPOINT_DEFAULTS, MAX_RATE,
 * RATE_LIMITED_OPERATIONS, SCOPES, the log line limits, the default waits).
 *
 * @example const doc = openApiDocument('0.1.0'); doc.paths['/v2/{endpoint}/run']
 */
export function openApiDocument(version: string): { openapi: string; info: Schema; paths: Record<string, Record<string, Operation>>; components: Schema } {
  const paths = {
    ...clientPaths(),
    ...openAiPaths(),
    ...workerPaths(),
    ...adminPaths(),
    ...filePaths(),
    '/healthz': { get: { tags: ['ops'], summary: 'Liveness', responses: { '200': { description: 'Alive' } } } },
    '/readyz': { get: { tags: ['ops'], summary: 'Readiness: store reachable, migrations done', responses: { '200': { description: 'Ready' }, '503': { description: 'Not ready' } } } },
  };
  return {
    openapi: '3.0.3',
    info: { title: 'Gantry', version, description: 'Self-hostable serverless job platform, wire-compatible with RunPod\'s v2 job API and worker protocol (docs/api.md).' },
    paths,
    components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer <API key>' } }, schemas: schemas() },
  };
}
