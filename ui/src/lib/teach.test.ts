import { describe, expect, it } from "vitest";
import { LabelQueue, positivesOf, queueActionFor, versionFigures } from "./teach";

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
  it("labels leave the queue, skips teach nothing, undo puts the last back where it was", () => {
    const queue = new LabelQueue(["a", "b", "c"]);
    queue.move(1);
    queue.labelled("pass", 7);
    expect(queue.items).toEqual(["a", "c"]);
    expect(queue.current).toBe("c");
    queue.labelled("skip", null);
    expect(queue.current).toBe("a");
    expect(queue.taught).toBe(1);
    expect(queue.undo()?.item).toBe("c");
    const undone = queue.undo();
    expect(undone).toMatchObject({ item: "b", label: "pass", exampleId: 7 });
    expect(queue.items).toEqual(["a", "b", "c"]);
    expect(queue.current).toBe("b");
    expect(queue.undo()).toBeUndefined();
    queue.move(-5);
    expect(queue.cursor).toBe(0);
  });
  it("an empty queue has nothing current and moving it does nothing", () => {
    const queue = new LabelQueue<string>([]);
    queue.move(1);
    queue.labelled("fail", 1);
    expect(queue.current).toBeUndefined();
    expect(queue.done).toEqual([]);
  });
});
