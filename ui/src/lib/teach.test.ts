import { describe, expect, it } from "vitest";
import { DecisionQueue } from "./queue";
import { curvePlaces, mayWithdraw, positivesOf, queueActionFor, taughtIn, versionFigures, type QueueRecord } from "./teach";

describe("teach helpers", () => {
  it("keeps each pasted example once, without blank lines", () => {
    expect(positivesOf(" a \n\nb\na\n  \n")).toEqual(["a", "b"]);
  });
  it("reads a version's figures and survives a broken record", () => {
    expect(versionFigures('{"cv": {"roc_auc": 0.91}, "threshold": 0.2}')).toEqual({ auc: 0.91, threshold: 0.2 });
    expect(versionFigures("not json")).toEqual({ auc: null, threshold: null });
  });

  it("lets a reviewer withdraw only a lone proposal of their own", () => {
    const proposal = {
      id: 1, validator: "toxic", text: "t", violates: true, language: "en", origin: "manual" as const,
      verdict_id: null, times_added: 1, contradicted: false, pending: true, submitted_by: "budi", updated_at: 0,
    };
    expect(mayWithdraw(proposal, " budi ")).toBe(true);
    expect(mayWithdraw(proposal, "sari")).toBe(false);
    expect(mayWithdraw({ ...proposal, pending: false }, "budi")).toBe(false);
    expect(mayWithdraw({ ...proposal, times_added: 2 }, "budi")).toBe(false);
    expect(mayWithdraw({ ...proposal, submitted_by: null }, "")).toBe(false);
  });

  it("maps the queue's keys and leaves the others alone", () => {
    expect(queueActionFor("F")).toEqual({ type: "label", label: "fail" });
    expect(queueActionFor("p")).toEqual({ type: "label", label: "pass" });
    expect(queueActionFor("s")).toEqual({ type: "label", label: "skip" });
    expect(queueActionFor("j")).toEqual({ type: "move", by: 1 });
    expect(queueActionFor("r")).toEqual({ type: "retrain" });
    expect(queueActionFor("a")).toBeNull();
  });
  it("counts the labels that taught, not the skips", () => {
    const queue = new DecisionQueue<string, QueueRecord>(["a", "b", "c"]);
    queue.decided({ label: "pass", exampleId: 7 });
    queue.decided({ label: "skip", exampleId: null });
    queue.decided({ label: "fail", exampleId: 8 });
    expect(taughtIn(queue.done)).toBe(2);
    expect(queue.undone()?.record).toEqual({ label: "fail", exampleId: 8 });
    expect(taughtIn(queue.done)).toBe(1);
  });

  it("shows a dozen places of a long curve, the line's own among them", () => {
    const curve = Array.from({ length: 40 }, (_, i) => ({
      threshold: (i + 1) / 50,
      recall: 1 - i / 40,
      near_misses_flagged: 1 - i / 20,
      benign_flagged: null,
    }));
    const places = curvePlaces(curve, 0.47);
    expect(places.length).toBeLessThanOrEqual(13);
    expect(places.map((p) => p.threshold)).toContain(0.46);
    expect(places[0].threshold).toBe(0.02);
    const short = curve.slice(0, 5);
    expect(curvePlaces(short, null)).toEqual(short);
  });
});
