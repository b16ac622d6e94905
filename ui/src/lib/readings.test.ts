import { describe, expect, it } from "vitest";
import { readingLabel, readingsLine, turnedNote } from "./readings";

const read = (reading: string, score: number, decided = false, turned = false) => ({ reading, score, decided, turned });

describe("readings", () => {
  it("names the shipped readings and shows a new one by its name", () => {
    expect(readingLabel("quotes_elided")).toBe("quotes elided");
    expect(readingLabel("added_since")).toBe("added since");
  });

  it("says what a reading that turned the decision did", () => {
    expect(turnedNote(read("in_context", 0.9, true, true), false)).toBe("caught in context");
    expect(turnedNote(read("quotes_elided", 0.04, true, true), true)).toBe("quote read as mentioned");
    expect(turnedNote(read("twice", 0.8, true, true), false)).toBe("caught by reading twice");
  });

  it("lists every reading and marks the one that decided", () => {
    expect(readingsLine([read("turn", 0.91), read("quotes_elided", 0.04, true, true)])).toBe(
      "as written 91.0% · quotes elided 4.0% (decided)",
    );
  });
});
