import { describe, expect, it } from "vitest";
import { positivesOf, versionFigures } from "./teach";

describe("teach helpers", () => {
  it("keeps each pasted example once, without blank lines", () => {
    expect(positivesOf(" a \n\nb\na\n  \n")).toEqual(["a", "b"]);
  });
  it("reads a version's figures and survives a broken record", () => {
    expect(versionFigures('{"cv": {"roc_auc": 0.91}, "threshold": 0.2}')).toEqual({ auc: 0.91, threshold: 0.2 });
    expect(versionFigures("not json")).toEqual({ auc: null, threshold: null });
  });
});
