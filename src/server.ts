import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino, type Logger } from 'pino';
import { createApp, type App } from './app.js';
import { loadConfig, type GantryConfig } from './config.js';
import { createRequestListener } from './http/server.js';
import { createApiKey } from './http/admin-routes.js';
import { createSecretBox, loadSecretKey, sha256Hex } from './jobs/secrets.js';
import { ensureImageEndpoints } from './images/image-endpoints.js';
import { startImageWorkers } from './images/image-workers.js';
import { deriveFileSigningKey } from './images/object-store.js';
import { createPgNotifier } from './dispatch/pg-notifier.js';
import { createSharedStorePoller } from './dispatch/shared-store-poller.js';
import { createLeader, type Leader } from './services/leader.js';
import { createAutoscaler } from './services/autoscaler.js';
import { createReaper } from './services/reaper.js';
import { createWebhookSender } from './services/webhook-sender.js';
import { openStore } from './store/open-store.js';
import { isPostgresStore } from './store/postgres/postgres-store.js';
import type { Store } from './store/store.js';

export interface StartOptions {
  /** Settings over the environment's (tests pass port 0 and a temp dataDir). */
  config?: Partial<GantryConfig>;
  env?: NodeJS.ProcessEnv;
  logger?: Logger;
  /** An already-open store (tests); by default openStore: PostgreSQL with DATABASE_URL, else the SQLite file `<dataDir>/gantry.db`. */
  store?: Store;
}

export interface Gantry {
  app: App;
  server: Server;
  /** http://host:port, as clients on this machine reach it. */
  url: string;
  port: number;
  /** The admin key, when this start created it (first start without GANTRY_ADMIN_KEY) or it was configured. */
  adminKey: string | null;
  /** Whether this gateway runs the singletons (always on SQLite; one gateway at a time on PostgreSQL). */
  leader: Leader;
  close(): Promise<void>;
}

/**
 * Starts a gateway: opens and migrates the store, makes sure an admin key exists, serves
 * HTTP and runs the background services.
 *
 * @example const gantry = await startGantry({ config: { port: 0, dataDir: '/tmp/g' } }); await gantry.close();
 */
export async function startGantry(options: StartOptions = {}): Promise<Gantry> {
  const env = options.env ?? process.env;
  const config = loadConfig(env, options.config);
  const logger = options.logger ?? pino({ level: config.logLevel, base: { service: 'gantry' } });
  const store = options.store ?? openStore(config, env);
  await store.migrate();
  const secretKey = loadSecretKey(config.dataDir, env);
  const secrets = createSecretBox(secretKey);
  const fileSigningKey = deriveFileSigningKey(secretKey);
  // Gateways sharing PostgreSQL wake each other through LISTEN/NOTIFY (docs/postgres.md).
  const notifier = isPostgresStore(store) ? createPgNotifier({ connection: store.pg, logger }) : undefined;
  await notifier?.start();
  const app = createApp({ config, store, logger, secrets, notifier, fileSigningKey });
  const adminKey = await ensureAdminKey(app);
  await ensureImageEndpoints(app);

  const server = createServer({ keepAliveTimeout: 65_000, requestTimeout: 0, headersTimeout: 60_000 }, createRequestListener(app));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://${config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host}:${port}`;

  const reaper = createReaper(app);
  const webhooks = createWebhookSender(app);
  const autoscaler = createAutoscaler(app, { baseUrl: config.publicUrl ?? url });
  // Singletons run on the leader only (always this gateway on SQLite); see services/leader.ts.
  // The autoscaler stops first on close: its workers drain while the gateway still serves them.
  const singletons: { start(): void; stop(): Promise<void> }[] = [autoscaler, reaper, webhooks];
  const leader = createLeader({ store, logger });
  let transition = Promise.resolve();
  leader.onChange((isLeader) => {
    transition = transition
      .then(async () => {
        if (isLeader) for (const s of singletons) s.start();
        else for (const s of singletons) await s.stop();
      })
      .catch((err: unknown) => logger.error({ err }, 'starting or stopping the singletons failed'));
  });
  leader.start();
  const poller = isPostgresStore(store) ? createSharedStorePoller(app) : undefined;
  poller?.start();
  // One image worker process per public endpoint on every gateway (GANTRY_IMAGE_WORKERS=off: none).
  const imageWorkers = config.images.workers
    ? await startImageWorkers({ app, gatewayUrl: url, publicUrl: config.publicUrl ?? url, secretKey, fileSigningKey })
    : null;
  logger.info({ url, dataDir: config.dataDir, store: store.kind }, 'gantry listening');

  let closing: Promise<void> | undefined;
  return {
    app,
    server,
    url,
    port,
    adminKey,
    leader,
    close() {
      closing ??= (async () => {
        await imageWorkers?.stop(); // first: they finish their job while the gateway still serves them
        await leader.stop();
        await transition;
        for (const s of singletons) await s.stop();
        poller?.stop();
        app.closeWaits();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        await notifier?.close();
        await store.close();
      })();
      return closing;
    },
  };
}

/**
 * GANTRY_ADMIN_KEY is installed if its hash is not stored yet; otherwise, with no admin key at
 * all, one is generated and returned so the caller can print it once.
 */
async function ensureAdminKey(app: App): Promise<string | null> {
  const configured = app.config.adminKey;
  if (configured) {
    if (!(await app.store.getKeyByHash(sha256Hex(configured)))) {
      await createApiKey(app, { name: 'admin (GANTRY_ADMIN_KEY)', scopes: ['admin'], endpoints: null }, configured);
    }
    return configured;
  }
  if ((await app.store.countKeysWithScope('admin')) > 0) return null;
  return (await createApiKey(app, { name: 'admin (first start)', scopes: ['admin'], endpoints: null })).key;
}
