/**
 * The reducer's order (core/reducer.ts, `applyEvent`) compiled into one
 * DynamoDB UpdateItem: the ConditionExpression accepts exactly the events
 * applyEvent applies, so an event costs one request with no read. A refusal
 * hands back the stored item (ReturnValuesOnConditionCheckFailure: ALL_OLD),
 * from which the pure reducer names the discard reason.
 *
 * applyEvent's rules, against the stored item's `rank` (the state's rank, -1
 * while only tracked), `state`, `eventId` and `updateTime`:
 *   - nothing stored, or no state yet (rank -1): apply;
 *   - the same eventId as the stored one: duplicate;
 *   - a higher rank than stored: apply (a terminal rank is the highest, so a
 *     terminal record never moves up);
 *   - the same rank, and a later updateTime (a stored null or absent time is
 *     earlier than any; an event without a time is never later), and at the
 *     terminal rank the same state: apply;
 *   - anything else: discard.
 *
 * `stateChanged` cannot be computed inside an update expression, so there
 * are two variants, each accepting a disjoint half of the applied events:
 *   - `change`: applied and the state differs (every rank increase, every
 *     first state, RUNNING <-> REQUIRES_ACTION at a later time); writes
 *     `stateChanged: true`, `previousState` = the stored state;
 *   - `refresh`: applied at the same state (a later time, a new result);
 *     writes `stateChanged: false`, `previousState` = the state.
 * The caller picks one (ingest: `change` unless it holds the record); a
 * refusal of the wrong variant is told apart by the reducer on ALL_OLD, and
 * the other variant is sent.
 *
 * Every item carries `rank` (store.write sets it too): `<` and `=` on a
 * missing attribute are false, so an item without it is refused by both
 * variants and ingest falls back to the read-and-compare-version write.
 */
import { isTerminal, rankOf, TERMINAL_RANK } from '../../core/lifecycle.ts';
import type { OperationEvent } from '../../core/reducer.ts';
import {
  AGE_INDEX_PARTITION,
  ageBucketOf,
  EFFECTS_GROUP_ATTRIBUTE,
  effectsGroupOf,
  LIST_INDEX_PARTITION,
  OPEN_INDEX_PARTITION,
  OPEN_INDEX_SORT,
  PARTITION_KEY,
  pollBucketOf,
  type WriteKind,
} from './tables.ts';

export const RANK_ATTRIBUTE = 'rank';
/** The rank of a tracked record with no state yet. (Pure: a bundle that opens no operations table leaves it out.) */
export const UNOBSERVED_RANK = /* @__PURE__ */ rankOf(null);

export type Variant = 'change' | 'refresh';

export interface CompiledWrite {
  UpdateExpression: string;
  ConditionExpression: string;
  ExpressionAttributeNames: Record<string, string>;
  ExpressionAttributeValues: Record<string, unknown>;
}

const placeholders = new Map<string, RegExp>();
/** `:state` is used, not merely a prefix of `:stateChanged`. */
function usedIn(expression: string, key: string): boolean {
  let pattern = placeholders.get(key);
  if (!pattern) {
    pattern = new RegExp(`${key}(?![A-Za-z])`);
    placeholders.set(key, pattern);
  }
  return pattern.test(expression);
}

/** The condition alone: what the equivalence property checks against applyEvent. */
export function compiledCondition(event: OperationEvent, variant: Variant): string {
  const rank = rankOf(event.state);
  const notDuplicate = event.eventId === undefined ? '' : '#eventId <> :eventId AND ';
  const later =
    event.updateTime === undefined
      ? undefined
      : '(attribute_not_exists(#updateTime) OR attribute_type(#updateTime, :nullType) OR #updateTime < :updateTime)';
  if (variant === 'refresh') {
    // Same state, hence same rank; a later time is required.
    if (!later) return 'attribute_exists(#pk) AND #rank = :impossible'; // never: no time, no refresh
    return `${notDuplicate}#state = :state AND #rank = :rank AND ${later}`;
  }
  const first = 'attribute_not_exists(#pk) OR #rank = :unobserved';
  // Only rank 1 holds two states (RUNNING, REQUIRES_ACTION); at the terminal rank a different state is a conflict.
  const sameRankMove = later && rank !== TERMINAL_RANK ? `(#rank = :rank AND #state <> :state AND ${later})` : undefined;
  // DynamoDB refuses redundant parentheses: add them only where precedence needs them.
  if (!notDuplicate) return `${first} OR #rank < :rank${sameRankMove ? ` OR ${sameRankMove}` : ''}`;
  return `${first} OR (${notDuplicate}${sameRankMove ? `(#rank < :rank OR ${sameRankMove})` : '#rank < :rank'})`;
}

/**
 * The whole UpdateItem (without TableName, Key and the return options) that
 * applies `event` at `now` if, and only if, applyEvent would, with `variant`'s
 * stateChanged. The resulting item is applyEvent's `next` record.
 */
export function compileWrite(event: OperationEvent, now: string, variant: Variant): CompiledWrite {
  const names: Record<string, string> = {
    '#pk': PARTITION_KEY,
    '#rank': RANK_ATTRIBUTE,
    '#state': 'state',
    '#updateTime': 'updateTime',
    '#version': 'version',
    '#bucket': OPEN_INDEX_PARTITION,
    '#due': OPEN_INDEX_SORT,
    '#age': AGE_INDEX_PARTITION,
    '#list': LIST_INDEX_PARTITION,
  };
  const writeKind: WriteKind = variant === 'change' ? 'state-change' : 'refresh';
  const values: Record<string, unknown> = {
    ':rank': rankOf(event.state),
    ':state': event.state,
    ':unobserved': UNOBSERVED_RANK,
    ':impossible': -2,
    ':nullType': 'NULL',
    ':null': null,
    ':zero': 0,
    ':one': 1,
    ':now': now,
    ':kind': event.kind,
    ':providerState': event.providerState,
    ':eventTime': event.updateTime ?? null,
    ':source': event.source,
    ':eventIdValue': event.eventId ?? null,
    ':stateChanged': variant === 'change',
    ':writeKind': writeKind,
    ':group': effectsGroupOf(event.name),
  };
  if (event.eventId !== undefined) values[':eventId'] = event.eventId;
  if (event.updateTime !== undefined) values[':updateTime'] = event.updateTime;
  const set = [
    // Right-hand sides read the item as it was before this update.
    variant === 'change' ? 'previousState = if_not_exists(#state, :null)' : 'previousState = :state',
    '#state = :state',
    '#rank = :rank',
    '#kind = :kind',
    'providerState = :providerState',
    '#updateTime = :eventTime',
    '#version = if_not_exists(#version, :zero) + :one',
    'stateChanged = :stateChanged',
    '#source = :source',
    'eventId = :eventIdValue',
    'createdAt = if_not_exists(createdAt, :now)',
    'recordedAt = :now',
    'writeKind = :writeKind',
    `${EFFECTS_GROUP_ATTRIBUTE} = :group`,
  ];
  names['#source'] = 'source';
  names['#kind'] = 'kind';
  names['#eventId'] = 'eventId';
  // A result or metadata the event does not carry keeps the stored one (applyEvent: `event.result ?? current.result`).
  if (event.result !== undefined) {
    values[':result'] = event.result;
    set.push('#result = :result');
  } else set.push('#result = if_not_exists(#result, :null)');
  names['#result'] = 'result';
  if (event.userMetadata !== undefined) {
    values[':userMetadata'] = event.userMetadata;
    set.push('userMetadata = :userMetadata');
  }
  let remove = '';
  // The open-operations indexes, as store.write keeps them: in while open, out once terminal. A job's age partition,
  // once it has one, stays as it is (marked overdue or not): only store.write marks.
  // A compiled write is never a result write, and never over a job waiting for one (compiled-apply.ts): a result
  // write's mark goes with the version after it.
  // No operation is in `recent-by-recorded` any more (tables.ts): one written before leaves it here.
  names['#resultWrite'] = 'resultWrite';
  if (isTerminal(event.state)) remove = ' REMOVE #bucket, #due, #age, #resultWrite, #list';
  else {
    remove = ' REMOVE #resultWrite, #list';
    values[':bucket'] = pollBucketOf(event.name);
    values[':age'] = ageBucketOf(event.name, event.kind);
    set.push('#bucket = :bucket', '#due = if_not_exists(#due, :now)', '#age = if_not_exists(#age, :age)');
  }
  const condition = compiledCondition(event, variant);
  // DynamoDB refuses names and values an expression does not use.
  const used = `${set.join(' ')} ${remove} ${condition}`;
  return {
    UpdateExpression: `SET ${set.join(', ')}${remove}`,
    ConditionExpression: condition,
    ExpressionAttributeNames: Object.fromEntries(Object.entries(names).filter(([key]) => used.includes(key))),
    ExpressionAttributeValues: Object.fromEntries(Object.entries(values).filter(([key]) => usedIn(used, key))),
  };
}
