import { afterEach, describe, expect, it } from "vitest";
import { clearMocks, mockIPC } from "@tauri-apps/api/mocks";
import { api, ConsoleFailure } from "./ipc";

afterEach(() => clearMocks());

describe("ipc", () => {
  it("sends commands with camelCase arguments and returns the answer", async () => {
    const calls: [string, unknown][] = [];
    mockIPC((cmd, args) => {
      calls.push([cmd, args]);
      if (cmd === "review") return 42;
      if (cmd === "check") return { verdict_id: 7, verdict: { status: "failed" } };
    });
    expect(await api.review(3, "agree", "ok")).toBe(42);
    const checked = await api.check("kamu bodoh");
    expect(checked.verdict_id).toBe(7);
    expect(calls[0]).toEqual(["review", { verdictId: 3, decision: "agree", note: "ok" }]);
    expect(calls[1]).toEqual(["check", { text: "kamu bodoh" }]);
  });

  it("turns a command error into a ConsoleFailure with kind and line", async () => {
    mockIPC((cmd) => {
      if (cmd === "save_template") {
        throw { kind: "template", message: "threshold must be between 0 and 1", line: 3 };
      }
    });
    const failure = await api.saveTemplate("spam", "---").catch((e) => e);
    expect(failure).toBeInstanceOf(ConsoleFailure);
    expect(failure.kind).toBe("template");
    expect(failure.line).toBe(3);
    expect(failure.message).toContain("threshold");
  });

  it("wraps anything else as an internal failure", async () => {
    mockIPC(() => {
      throw "boom";
    });
    const failure = await api.settings().catch((e) => e);
    expect(failure.kind).toBe("internal");
    expect(failure.message).toBe("boom");
  });
});
