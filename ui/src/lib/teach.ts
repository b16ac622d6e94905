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

export interface QueueDecision<T> {
  item: T;
  index: number;
  label: QueueLabel;
  /** The example the label became; null for a skip. */
  exampleId: number | null;
}

/** Suggestions still to label; labelled ones leave the list and come back on undo. */
export class LabelQueue<T> {
  items: T[];
  cursor = 0;
  done: QueueDecision<T>[] = [];

  constructor(items: T[]) {
    this.items = [...items];
  }

  get current(): T | undefined {
    return this.items[this.cursor];
  }

  move(by: number): void {
    if (this.items.length === 0) return;
    this.cursor = Math.min(this.items.length - 1, Math.max(0, this.cursor + by));
  }

  /** Records a label the console accepted; the cursor stays on the next item. */
  labelled(label: QueueLabel, exampleId: number | null): void {
    const item = this.current;
    if (item === undefined) return;
    this.done.push({ item, index: this.cursor, label, exampleId });
    this.items.splice(this.cursor, 1);
    this.cursor = Math.min(this.cursor, Math.max(0, this.items.length - 1));
  }

  /** Puts the last labelled item back where it was and returns it (its example is the caller's
   * to remove). */
  undo(): QueueDecision<T> | undefined {
    const last = this.done.pop();
    if (!last) return undefined;
    const at = Math.min(last.index, this.items.length);
    this.items.splice(at, 0, last.item);
    this.cursor = at;
    return last;
  }

  /** Labels that became examples (skips do not teach). */
  get taught(): number {
    return this.done.filter((d) => d.label !== "skip").length;
  }
}
