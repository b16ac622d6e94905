import { describe, expect, it } from "vitest";
import { DecisionQueue } from "./queue";
import { positivesOf, queueActionFor, taughtIn, versionFigures, type QueueRecord } from "./teach";

describe("teach helpers", () => {
  it("keeps each pasted example once, without blank lines", () => {
    expect(positivesOf(" a \n\nb\na\n  \n")).toEqual(["a", "b"]);
  });
  it("reads a version's figures and survives a broken record", () => {
    expect(versionFigures('{"cv": {"roc_auc": 0.91}, "threshold": 0.2}')).toEqual({ auc: 0.91, threshold: 0.2 });
    expect(versionFigures("not json")).toEqual({ auc: null, threshold: null });
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
});
