/**
 * Which stream records run effects: writes whose NewImage says they changed
 * the state (`writeKind: state-change`) or found the job overdue (`overdue`,
 * core/overdue.ts). Discarded events write nothing (no
 * record); tracking, same-state refreshes and reconcile's poll scheduling
 * write other kinds. The stack puts this pattern verbatim in the event source
 * mapping's filter criteria; the local stream mapping applies it with
 * `matchesFilter`.
 */
export const STATE_CHANGE_FILTER = {
  eventName: ['INSERT', 'MODIFY'],
  dynamodb: { NewImage: { writeKind: { S: ['state-change', 'result', 'overdue'] } } },
} as const;

type Pattern = { readonly [key: string]: Pattern | readonly unknown[] };

/**
 * The subset of Lambda's filter-pattern language Ratchet uses: nested objects
 * and lists of allowed exact values; a field named in the pattern must exist.
 */
export function matchesFilter(pattern: Pattern, value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const object = value as Record<string, unknown>;
  return Object.entries(pattern).every(([key, expected]) =>
    Array.isArray(expected) ? expected.includes(object[key]) : matchesFilter(expected as Pattern, object[key]),
  );
}
