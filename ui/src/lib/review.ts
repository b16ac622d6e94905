// The review queue's keyboard session: where the cursor is, what was decided, and undo.
import type { Decision } from "../bindings/Decision";
import type { HistoryRow } from "../bindings/HistoryRow";

export type ReviewAction =
  | { type: "move"; by: number }
  | { type: "decide"; decision: Decision }
  | { type: "note" }
  | { type: "undo" };

/** J/K move, A agree, O overturn, N note, U undo; anything else is not ours. */
export function actionFor(key: string): ReviewAction | null {
  switch (key.toLowerCase()) {
    case "j":
      return { type: "move", by: 1 };
    case "k":
      return { type: "move", by: -1 };
    case "a":
      return { type: "decide", decision: "agree" };
    case "o":
      return { type: "decide", decision: "overturn" };
    case "n":
      return { type: "note" };
    case "u":
      return { type: "undo" };
    default:
      return null;
  }
}

export interface Decided {
  item: HistoryRow;
  index: number;
  reviewId: number;
  decision: Decision;
}

/** Items still to review; decided ones leave the list and come back on undo. */
export class ReviewSession {
  items: HistoryRow[];
  cursor = 0;
  done: Decided[] = [];

  constructor(items: HistoryRow[]) {
    this.items = [...items];
  }

  get current(): HistoryRow | undefined {
    return this.items[this.cursor];
  }

  move(by: number): void {
    if (this.items.length === 0) return;
    this.cursor = Math.min(this.items.length - 1, Math.max(0, this.cursor + by));
  }

  /** Records a decision the store accepted; the cursor stays on the next item. */
  decided(reviewId: number, decision: Decision): void {
    const item = this.current;
    if (!item) return;
    this.done.push({ item, index: this.cursor, reviewId, decision });
    this.items.splice(this.cursor, 1);
    this.cursor = Math.min(this.cursor, Math.max(0, this.items.length - 1));
  }

  /** The last decision to take back, if any. */
  lastDecided(): Decided | undefined {
    return this.done[this.done.length - 1];
  }

  /** Puts the last decided item back where it was, after the store removed its review. */
  undone(): void {
    const last = this.done.pop();
    if (!last) return;
    const at = Math.min(last.index, this.items.length);
    this.items.splice(at, 0, last.item);
    this.cursor = at;
  }
}
