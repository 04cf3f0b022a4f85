/**
 * The canonical lifecycle of a long-running operation.
 *
 * Rank orders the states: an operation only moves to a higher rank, and the
 * terminal rank is absorbing. REQUIRES_ACTION (an interaction waiting for the
 * caller) shares RUNNING's rank: within a rank only a newer updateTime moves
 * the state, so RUNNING -> REQUIRES_ACTION -> RUNNING is possible while time
 * moves forward.
 */
export const OPERATION_STATES = ['PENDING', 'RUNNING', 'REQUIRES_ACTION', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'EXPIRED'] as const;

export type OperationState = (typeof OPERATION_STATES)[number];

export const TERMINAL_RANK = 2;

const RANKS: Readonly<Record<OperationState, number>> = {
  PENDING: 0,
  RUNNING: 1,
  REQUIRES_ACTION: 1,
  SUCCEEDED: TERMINAL_RANK,
  FAILED: TERMINAL_RANK,
  CANCELLED: TERMINAL_RANK,
  EXPIRED: TERMINAL_RANK,
};

/** Rank of a state; a tracked operation with no observed state yet ranks below PENDING. */
export function rankOf(state: OperationState | null | undefined): number {
  return state ? RANKS[state] : -1;
}

export function isTerminal(state: OperationState | null | undefined): boolean {
  return rankOf(state) === TERMINAL_RANK;
}

export function isOperationState(value: unknown): value is OperationState {
  return typeof value === 'string' && Object.hasOwn(RANKS, value);
}

/**
 * Kinds of Gemini long-running work Ratchet knows how to name and poll: on the
 * Gemini API (`batch`, `video`, `interaction`, `operation`, and `file-search`:
 * a File Search store's import or upload, polled only) and on the Gemini
 * Enterprise Agent Platform, formerly Vertex AI (`platform-*`, tuning jobs
 * among them: polled only, it sends no webhooks).
 */
export const OPERATION_KINDS = [
  'batch',
  'video',
  'interaction',
  'operation',
  'platform-batch',
  'platform-video',
  'platform-interaction',
  'file-search',
  'platform-tuning',
] as const;
export type OperationKind = (typeof OPERATION_KINDS)[number];

/** Where a kind of job lives, and so which credentials poll it. */
export type Backend = 'gemini-api' | 'agent-platform';

export function backendOf(kind: OperationKind): Backend {
  return kind.startsWith('platform-') ? 'agent-platform' : 'gemini-api';
}
