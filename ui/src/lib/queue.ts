// A queue worked through with the keyboard (the Review queue, the Teach view's labelling queue):
// a cursor over the items; a decided item leaves the list with what the console recorded for it,
// and comes back where it was on undo.

export interface Decided<T, R> {
  item: T;
  index: number;
  /** What the console recorded for the decision (a review's id, an example's id and label). */
  record: R;
}

export class DecisionQueue<T, R> {
  items: T[];
  cursor = 0;
  done: Decided<T, R>[] = [];

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

  /** Records a decision the console accepted; the cursor stays on the next item. */
  decided(record: R): void {
    const item = this.current;
    if (item === undefined) return;
    this.done.push({ item, index: this.cursor, record });
    this.items.splice(this.cursor, 1);
    this.cursor = Math.min(this.cursor, Math.max(0, this.items.length - 1));
  }

  /** Drops the current item undecided (someone else took it); the cursor stays in place. */
  dropCurrent(): T | undefined {
    const item = this.current;
    if (item === undefined) return undefined;
    this.items.splice(this.cursor, 1);
    this.cursor = Math.min(this.cursor, Math.max(0, this.items.length - 1));
    return item;
  }

  /** The last decision to take back, if any. */
  lastDecided(): Decided<T, R> | undefined {
    return this.done[this.done.length - 1];
  }

  /** Puts the last decided item back where it was (once the console took its record back). */
  undone(): Decided<T, R> | undefined {
    const last = this.done.pop();
    if (!last) return undefined;
    const at = Math.min(last.index, this.items.length);
    this.items.splice(at, 0, last.item);
    this.cursor = at;
    return last;
  }
}
