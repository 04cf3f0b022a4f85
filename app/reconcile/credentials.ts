/**
 * Which Gemini API keys Gemini takes: per key label (GEMINI_API_KEYS), its
 * last answer. The poller notes each; the console and the health answer show
 * a refused one. Apart from the poller so that reading it loads no SDK.
 */

/** How Gemini last answered one key, by its label (the key itself is never kept here). */
export interface CredentialStatus {
  /** The key's label; '' for a single GEMINI_API_KEY. */
  label: string;
  /** `refused`: Gemini answered 401 or 403 to it; `ok`: it was accepted since; `unused`: not used yet. */
  state: 'ok' | 'refused' | 'unused';
  /** The refusal's HTTP status. */
  status?: number;
  /** When it was last refused or accepted. */
  at?: string;
}

/** Per key label, whether Gemini takes it: read by the console and the health answer. */
export class CredentialHealth {
  private readonly byLabel = new Map<string, CredentialStatus>();

  constructor(labels: string[]) {
    for (const label of labels) this.byLabel.set(label, { label, state: 'unused' });
  }

  accepted(label: string): void {
    if (this.byLabel.get(label)?.state !== 'ok') this.byLabel.set(label, { label, state: 'ok', at: new Date().toISOString() });
  }

  refused(label: string, status: number): void {
    this.byLabel.set(label, { label, state: 'refused', status, at: new Date().toISOString() });
  }

  /** Every key seen or configured, in order. */
  all(): CredentialStatus[] {
    return [...this.byLabel.values()];
  }

  /** The labels Gemini refuses now. */
  refusedLabels(): string[] {
    return this.all()
      .filter((c) => c.state === 'refused')
      .map((c) => c.label);
  }
}
