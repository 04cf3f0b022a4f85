/**
 * Reconcile's pollers, one per provider with a credential here, and the
 * router that hands each job to its kind's provider (providers/port.ts). Each
 * provider's SDK is loaded only when its poller is opened, and only where its
 * credential is set: a Gemini-only Ratchet never reads `openai`.
 */
import { labelledKeysOf } from '../../core/credentials.ts';
import { type ProviderName, providerOf } from '../../core/lifecycle.ts';
import type { KeyHealth, LabelledKey, PollAnswer, PollTarget, ProviderPoller } from '../../providers/port.ts';
import { azureResourceOf, type Config } from '../config.ts';
import { NotPolledHereError } from './poller.ts';

/** What reconcile polls each provider other than Gemini with, resolved from the configuration (secrets included). */
export interface ProviderPollerSettings {
  openai?: { keys: LabelledKey[]; baseUrl?: string };
  anthropic?: { keys: LabelledKey[]; baseUrl?: string };
  'azure-openai'?: { endpoint: string; apiKey: string; resource: string };
  /** Bedrock: the AWS default credential chain, the jobs of this region (AWS_REGION). */
  bedrock?: { region: string; endpoint?: string };
}

/** Where each provider's credential is set: said in the one line that names the providers not polled. */
export const CREDENTIAL_VARIABLES: Readonly<Record<ProviderName, string>> = {
  gemini: 'GEMINI_API_KEY, GEMINI_API_KEYS or GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION',
  openai: 'OPENAI_API_KEY or OPENAI_API_KEYS',
  anthropic: 'ANTHROPIC_API_KEY or ANTHROPIC_API_KEYS',
  'azure-openai': 'AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_API_KEY',
  bedrock: 'AWS_REGION (the AWS default credential chain)',
};

/** The keys of OPENAI_API_KEY(S) or ANTHROPIC_API_KEY(S): one key ('' its label), or several by label. */
function keysOf(single: string | undefined, pairs: string | undefined): LabelledKey[] | undefined {
  if (pairs) return labelledKeysOf(pairs);
  return single ? [{ label: '', apiKey: single }] : undefined;
}

export function providerPollerSettingsOf(config: Config): ProviderPollerSettings {
  const openai = keysOf(config.OPENAI_API_KEY, config.OPENAI_API_KEYS);
  const anthropic = keysOf(config.ANTHROPIC_API_KEY, config.ANTHROPIC_API_KEYS);
  const azure = config.AZURE_OPENAI_ENDPOINT && config.AZURE_OPENAI_API_KEY;
  return {
    ...(openai && { openai: { keys: openai, ...(config.OPENAI_BASE_URL && { baseUrl: config.OPENAI_BASE_URL }) } }),
    ...(anthropic && { anthropic: { keys: anthropic, ...(config.ANTHROPIC_BASE_URL && { baseUrl: config.ANTHROPIC_BASE_URL }) } }),
    ...(azure && {
      'azure-openai': {
        endpoint: config.AZURE_OPENAI_ENDPOINT as string,
        apiKey: config.AZURE_OPENAI_API_KEY as string,
        resource: azureResourceOf(config.AZURE_OPENAI_ENDPOINT as string),
      },
    }),
    ...(config.AWS_REGION && {
      bedrock: { region: config.AWS_REGION, ...(config.AWS_ENDPOINT_URL_BEDROCK && { endpoint: config.AWS_ENDPOINT_URL_BEDROCK }) },
    }),
  };
}

/** The pollers of every provider with settings, each noting its keys' answers in `keyHealth(provider)`. */
export async function openProviderPollers(
  settings: ProviderPollerSettings,
  keyHealth: (provider: ProviderName) => KeyHealth,
  timeoutMs?: number,
): Promise<Partial<Record<ProviderName, ProviderPoller>>> {
  const pollers: Partial<Record<ProviderName, ProviderPoller>> = {};
  const common = (provider: ProviderName) => ({ keyHealth: keyHealth(provider), ...(timeoutMs && { timeoutMs }) });
  if (settings.openai || settings['azure-openai']) {
    const { OpenAIPoller, AzureOpenAIPoller } = await import('../../providers/openai/poller.ts');
    if (settings.openai) pollers.openai = new OpenAIPoller({ ...settings.openai, ...common('openai') });
    if (settings['azure-openai'])
      pollers['azure-openai'] = new AzureOpenAIPoller({ ...settings['azure-openai'], ...common('azure-openai') });
  }
  if (settings.anthropic) {
    const { AnthropicPoller } = await import('../../providers/anthropic/poller.ts');
    pollers.anthropic = new AnthropicPoller({ ...settings.anthropic, ...common('anthropic') });
  }
  if (settings.bedrock) {
    const { BedrockPoller } = await import('../../providers/bedrock/poller.ts');
    pollers.bedrock = new BedrockPoller({ ...settings.bedrock, ...common('bedrock') });
  }
  return pollers;
}

/** Each job to its kind's provider's poller; a provider with none here is not polled (the job backs off, asked again later). */
export class ProviderRouter {
  constructor(private readonly pollers: Partial<Record<ProviderName, Pick<ProviderPoller, 'poll'>>>) {}

  poll(operation: PollTarget): Promise<PollAnswer> {
    const provider = providerOf(operation.kind);
    const poller = this.pollers[provider];
    if (!poller) throw new NotPolledHereError(`not polled here: no credential for ${provider} (${CREDENTIAL_VARIABLES[provider]})`);
    return poller.poll(operation);
  }

  /** The providers polled here. */
  get providers(): ProviderName[] {
    return Object.keys(this.pollers) as ProviderName[];
  }
}
