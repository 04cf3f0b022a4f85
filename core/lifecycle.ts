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
 * Kinds of long-running work Ratchet knows how to name and poll, by provider.
 * Gemini's: on the Gemini API (`batch`, `video`, `interaction`, `operation`,
 * and `file-search`: a File Search store's import or upload, polled only) and
 * on the Gemini Enterprise Agent Platform, formerly Vertex AI (`platform-*`,
 * tuning jobs among them: polled only, it sends no webhooks). Every other
 * provider's kinds start with the provider (providers/<provider>/ knows them).
 */
export const PROVIDER_KINDS = {
  gemini: [
    'batch',
    'video',
    'interaction',
    'operation',
    'platform-batch',
    'platform-video',
    'platform-interaction',
    'file-search',
    'platform-tuning',
  ],
  openai: ['openai-batch', 'openai-response', 'openai-video', 'openai-fine-tuning', 'openai-eval-run'],
  anthropic: ['anthropic-batch'],
  bedrock: ['bedrock-batch'],
  'azure-openai': ['azure-openai-batch'],
} as const;

export type ProviderName = keyof typeof PROVIDER_KINDS;
export const PROVIDERS = Object.keys(PROVIDER_KINDS) as ProviderName[];
export type OperationKind = (typeof PROVIDER_KINDS)[ProviderName][number];
export const OPERATION_KINDS: readonly OperationKind[] = PROVIDERS.flatMap((provider) => PROVIDER_KINDS[provider]);

const PROVIDER_OF = new Map<string, ProviderName>(
  PROVIDERS.flatMap((provider) => PROVIDER_KINDS[provider].map((kind) => [kind, provider] as const)),
);

/** The provider a kind of job runs on (`gemini` for a kind it does not know: none is stored that it does not know). */
export function providerOf(kind: string): ProviderName {
  return PROVIDER_OF.get(kind) ?? 'gemini';
}

export function isProviderName(value: unknown): value is ProviderName {
  return typeof value === 'string' && Object.hasOwn(PROVIDER_KINDS, value);
}

/** Where a Gemini job lives, and so which credentials poll it. */
export type Backend = 'gemini-api' | 'agent-platform';

export function backendOf(kind: OperationKind): Backend {
  return kind.startsWith('platform-') ? 'agent-platform' : 'gemini-api';
}
