/**
 * One Ratchet instance around an engine, the same for every front end: the
 * only place that starts an engine's work, runs reconcile on its schedule,
 * claims and runs the hourly chores, does a cron's bounded round (`tick`) and
 * closes. `ratchet start` is an instance plus a Node server
 * (local/runtime.ts); `createRatchet` an instance plus a mount and the
 * in-process client (local/library.ts). Where several instances share one
 * database, each timed chore runs on the one that claims it (Engine.claimJob).
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { ProviderName } from '../core/lifecycle.ts';
import type { Engine } from './engine.ts';
import { CredentialHealth } from './reconcile/credentials.ts';
import { openReconciler, type ReconcileSettings } from './reconcile/open.ts';
import type { ReconcileStats } from './reconcile/reconcile.ts';
import { LocalSchedule, maintain } from './schedule.ts';
import type { Telemetry } from './telemetry.ts';

export interface InstanceSettings {
  /** Absent: reconcile polls nothing (no Gemini credentials); webhooks still work. */
  reconcile?: ReconcileSettings;
  /** The labels of GEMINI_API_KEYS (none for a single GEMINI_API_KEY): whose health the console and `/healthz` show. */
  credentialLabels: string[];
  /** Per provider, the labels of its keys (`*_API_KEYS`; none for a single key): a track names one of them. */
  providerLabels?: Partial<Record<ProviderName, string[]>>;
}

export interface TickResult {
  /** Reconcile's run (absent when nothing is polled: no Gemini credentials). */
  reconcile?: ReconcileStats;
  /** Effects settled this round (delivered, retried later or dead-lettered). */
  effects: number;
  /** Whether this round ran the hourly chores (one instance an hour does). */
  maintenance: boolean;
  /** How long the round took, ms. */
  tookMs: number;
}

export interface Instance {
  readonly engine: Engine;
  /** Whether Gemini takes each API key, as reconcile finds. */
  readonly credentials: CredentialHealth;
  /** Whether each other provider takes each of its keys, as reconcile finds. */
  readonly providerKeys: ReadonlyMap<ProviderName, CredentialHealth>;
  /** Whether reconcile polls anything. */
  readonly reconciles: boolean;
  /** An extra reconcile run now (a webhook asked for a poll): only where the schedule runs (`start`). */
  pollSoon(): void;
  /** The work on timers, for a process that stays up: the engine's own, reconcile every interval, the chores hourly. */
  start(): Promise<void>;
  /** One bounded round of the same work without timers, for a cron: reconcile in half the budget, the due effects, the chores if due. */
  tick(budgetMs: number): Promise<TickResult>;
  /** Stops the timers and closes the engine; `failed`: its start did not finish (a data folder it created goes). */
  close(failed?: boolean): Promise<void>;
}

const HOUR_MS = 3_600_000;
/** An hour's chores claimed 5 minutes short of the hour, so an hourly timer's next round is never refused by its own last claim. */
const CHORES_CLAIM_MS = HOUR_MS - 300_000;

/** The instance on an opened engine; the engine is closed (as failed) if reconcile cannot be set up. */
export async function openInstance(
  engine: Engine,
  settings: InstanceSettings,
  deps: { logger: Logger; telemetry?: Telemetry },
): Promise<Instance> {
  const { logger } = deps;
  const credentials = new CredentialHealth(settings.credentialLabels);
  const providerKeys = new Map<ProviderName, CredentialHealth>();
  const keyHealth = (provider: ProviderName) => {
    const health = providerKeys.get(provider) ?? new CredentialHealth(settings.providerLabels?.[provider] ?? []);
    providerKeys.set(provider, health);
    return health;
  };
  let reconciler: Awaited<ReturnType<typeof openReconciler>>;
  try {
    if (engine.starts === 'on-open') await engine.start();
    reconciler = await openReconciler(settings.reconcile, engine, { ...deps, credentials, keyHealth });
  } catch (error) {
    await engine.close(true);
    throw error;
  }
  let started = false;
  let closed = false;
  let schedule: LocalSchedule | undefined;
  const stops: Array<() => unknown> = [];

  // At most once an hour in this process, and on one instance of a shared database.
  let choresAt = Number.NEGATIVE_INFINITY;
  const chores = async (): Promise<boolean> => {
    const now = Date.now();
    if (now - choresAt < CHORES_CLAIM_MS) return false;
    choresAt = now;
    const claimed = engine.claimJob ? await engine.claimJob('maintenance', CHORES_CLAIM_MS).catch(() => undefined) : true;
    // A claim that could not be asked (the database away) is asked again next time; one another instance holds covers the hour.
    if (claimed === undefined) choresAt = Number.NEGATIVE_INFINITY;
    if (!claimed) return false;
    await maintain(engine.maintenance, logger);
    return true;
  };

  return {
    engine,
    credentials,
    providerKeys,
    reconciles: reconciler !== undefined,
    pollSoon: () => schedule?.runSoon(),
    async start() {
      if (started || closed) return;
      started = true;
      if (engine.starts === 'when-resident') await engine.start();
      void chores();
      const hourly = setInterval(() => void chores(), HOUR_MS).unref();
      stops.push(() => clearInterval(hourly));
      if (reconciler) {
        const periodMs = (settings.reconcile?.intervalSeconds ?? 0) * 1000;
        const run = reconciler;
        const running = new LocalSchedule(periodMs, () => run(periodMs * 0.8), logger);
        schedule = running;
        running.start();
        stops.push(() => running.stop());
      }
    },
    async tick(budgetMs) {
      const startedAt = Date.now();
      const reconcile = reconciler && (await reconciler(budgetMs / 2));
      const effects = (await engine.drainEffects?.(Math.max(0, startedAt + budgetMs - Date.now()))) ?? 0;
      const maintenance = await chores();
      return { ...(reconcile && { reconcile }), effects, maintenance, tookMs: Date.now() - startedAt };
    },
    async close(failed = false) {
      if (closed) return;
      closed = true;
      for (const stop of stops.splice(0).reverse()) await stop();
      await engine.close(failed);
    },
  };
}
