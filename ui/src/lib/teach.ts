// Pure helpers of the Teach view.

/** Positive examples a new validator needs (the console refuses fewer). */
export const MIN_NEW_POSITIVES = 20;

/** The lines of a pasted block that are examples: trimmed, non-empty, each once. */
export function positivesOf(block: string): string[] {
  return [...new Set(block.split("\n").map((l) => l.trim()).filter((l) => l.length > 0))];
}

/** The figures a head version's stored training record holds. */
export function versionFigures(metrics: string): { auc: number | null; threshold: number | null } {
  try {
    const record = JSON.parse(metrics);
    return { auc: record?.cv?.roc_auc ?? null, threshold: record?.threshold ?? null };
  } catch {
    return { auc: null, threshold: null };
  }
}
