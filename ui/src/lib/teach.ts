// Pure helpers of the Teach view.

import type { LinePoint } from "../bindings/LinePoint";
import type { StoredExample } from "../bindings/StoredExample";

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

/** What an author says about a suggested message. */
export type QueueLabel = "fail" | "pass" | "skip";

export type QueueAction =
  | { type: "move"; by: number }
  | { type: "label"; label: QueueLabel }
  | { type: "undo" }
  | { type: "retrain" };

/** The labelling queue's keys, the Review queue's where they mean the same: J/K move, U undo;
 * F should fail, P should pass, S skip, R train again. Anything else is not ours. */
export function queueActionFor(key: string): QueueAction | null {
  switch (key.toLowerCase()) {
    case "j":
      return { type: "move", by: 1 };
    case "k":
      return { type: "move", by: -1 };
    case "f":
      return { type: "label", label: "fail" };
    case "p":
      return { type: "label", label: "pass" };
    case "s":
      return { type: "label", label: "skip" };
    case "u":
      return { type: "undo" };
    case "r":
      return { type: "retrain" };
    default:
      return null;
  }
}

/** What a label in the queue became: the example, or nothing for a skip. */
export interface QueueRecord {
  label: QueueLabel;
  exampleId: number | null;
}

/** Labels that became examples (skips do not teach). */
export function taughtIn(done: { record: QueueRecord }[]): number {
  return done.filter((d) => d.record.label !== "skip").length;
}

/** At most `shown` places of the curve, evenly by rank and lowest threshold first, always
 * with the one nearest `line` (where the line is now), so the table stays short whatever the
 * number of examples. */
export function curvePlaces<P extends LinePoint>(curve: P[], line: number | null, shown = 12): P[] {
  if (curve.length <= shown) return curve;
  const step = Math.ceil(curve.length / shown);
  let nearest = -1;
  if (line != null) {
    let best = Infinity;
    curve.forEach((p, i) => {
      const distance = Math.abs(p.threshold - line);
      if (distance < best) [best, nearest] = [distance, i];
    });
  }
  return curve.filter((_, i) => i % step === 0 || i === nearest);
}

/** Whether a reviewer who may not teach can still withdraw `example`: a proposal of their own
 * (`actingAs`, the name the console acts as) that no one has accepted or added again, as the
 * store allows (`Store::remove_example`). */
export function mayWithdraw(example: StoredExample, actingAs: string): boolean {
  const me = actingAs.trim();
  return example.pending && example.times_added === 1 && me !== "" && example.submitted_by === me;
}
