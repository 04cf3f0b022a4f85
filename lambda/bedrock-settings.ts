/**
 * What the rule on the default bus matches of Bedrock's events (lib/ratchet.ts)
 * and the function it feeds checks (bedrock-events.ts): plain values, so the
 * construct imports them without the ingest.
 */
export const BEDROCK_EVENT_SOURCE = 'aws.bedrock';
export const BEDROCK_EVENT_DETAIL_TYPE = 'Batch Inference Job State Change';
