import { describe, expect, it } from "vitest";
import type { HistoryRow } from "../bindings/HistoryRow";
import { lineDiff } from "./diff";
import { duration, histogramHeights, percent, uncertainty } from "./format";
import { actionFor, ReviewSession } from "./review";
import { visibleRows } from "./virtual";

const row = (id: number): HistoryRow =>
  ({ verdict_id: id, text: `m${id}`, status: "failed", results: [] }) as unknown as HistoryRow;

describe("review session", () => {
  it("maps the review keys", () => {
    expect(actionFor("J")).toEqual({ type: "move", by: 1 });
    expect(actionFor("k")).toEqual({ type: "move", by: -1 });
    expect(actionFor("a")).toEqual({ type: "decide", decision: "agree" });
    expect(actionFor("o")).toEqual({ type: "decide", decision: "overturn" });
    expect(actionFor("n")).toEqual({ type: "note" });
    expect(actionFor("u")).toEqual({ type: "undo" });
    expect(actionFor("x")).toBeNull();
  });

  it("moves within bounds, removes decided items and puts them back on undo", () => {
    const s = new ReviewSession([row(1), row(2), row(3)]);
    s.move(-1);
    expect(s.cursor).toBe(0);
    s.move(1);
    s.decided({ reviewId: 100, decision: "agree" });
    expect(s.items.map((r) => r.verdict_id)).toEqual([1, 3]);
    expect(s.current?.verdict_id).toBe(3);
    s.decided({ reviewId: 101, decision: "overturn" });
    expect(s.current?.verdict_id).toBe(1);
    expect(s.lastDecided()?.record.reviewId).toBe(101);
    s.undone();
    expect(s.items.map((r) => r.verdict_id)).toEqual([1, 3]);
    expect(s.current?.verdict_id).toBe(3);
    s.undone();
    s.undone();
    expect(s.items.map((r) => r.verdict_id)).toEqual([1, 2, 3]);
    s.move(10);
    expect(s.cursor).toBe(2);
  });

  it("drops an item someone else took, with nothing to undo", () => {
    const s = new ReviewSession([row(1), row(2), row(3)]);
    s.move(2);
    expect(s.dropCurrent()?.verdict_id).toBe(3);
    expect(s.current?.verdict_id).toBe(2);
    expect(s.lastDecided()).toBeUndefined();
    s.dropCurrent();
    s.dropCurrent();
    expect(s.dropCurrent()).toBeUndefined();
  });
});

describe("formatting", () => {
  it("formats durations, percentages and histograms", () => {
    expect(duration(42)).toBe("42 s");
    expect(duration(185)).toBe("3 min 05 s");
    expect(duration(3720)).toBe("1 h 02 min");
    expect(duration(null)).toBe("—");
    expect(percent(0.4567)).toBe("45.7%");
    expect(percent(1)).toBe("100%");
    expect(histogramHeights([0, 2, 4])).toEqual([0, 0.5, 1]);
    expect(histogramHeights([0, 0])).toEqual([0, 0]);
    expect(uncertainty([{ score: 0.9, threshold: 0.5 }, { score: 0.45, threshold: 0.5 }])).toBeCloseTo(0.05);
  });
});

describe("virtual rows", () => {
  it("renders only the rows in view plus overscan, for 100,000 rows", () => {
    const w = visibleRows(34 * 50_000, 680, 34, 100_000, 8);
    expect(w.start).toBe(49_992);
    expect(w.end).toBe(50_028);
    expect(w.offset).toBe(49_992 * 34);
    expect(visibleRows(0, 680, 34, 5).end).toBe(5);
  });
});

describe("diff", () => {
  it("marks added and removed lines", () => {
    expect(lineDiff("a\nb\n", "a\nc\n")).toEqual([
      { kind: "same", text: "a" },
      { kind: "removed", text: "b" },
      { kind: "added", text: "c" },
    ]);
  });
});
