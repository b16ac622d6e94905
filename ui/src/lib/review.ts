// The review queue's keyboard session: where the cursor is, what was decided, and undo.
import type { Decision } from "../bindings/Decision";
import type { HistoryRow } from "../bindings/HistoryRow";
import { DecisionQueue } from "./queue";

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

/** What the store recorded for a reviewed item. */
export interface ReviewRecord {
  reviewId: number;
  decision: Decision;
}

/** Items still to review; decided ones leave the list and come back on undo. */
export class ReviewSession extends DecisionQueue<HistoryRow, ReviewRecord> {}
