// The one module that talks to Tauri: every command, event and dialog goes through here, typed
// with the bindings generated from the Rust definitions.
import { invoke, type InvokeArgs } from "@tauri-apps/api/core";
import { listen, type UnlistenFn } from "@tauri-apps/api/event";
import { open } from "@tauri-apps/plugin-dialog";

import { commands, type Command, type Commands } from "../bindings/Commands";
import type { CommandError } from "../bindings/CommandError";
import type { ConsoleEvent } from "../bindings/ConsoleEvent";
import type { ErrorKind } from "../bindings/ErrorKind";

/** A command's failure, as thrown by every call below. */
export class ConsoleFailure extends Error {
  /** The console's kind, or "internal" when the call never reached it. */
  kind: ErrorKind | "internal";
  line: number | null;
  constructor(error: CommandError | { kind: "internal"; message: string; line: null }) {
    super(error.message);
    this.kind = error.kind;
    this.line = error.line;
  }
}

function isCommandError(value: unknown): value is CommandError {
  return typeof value === "object" && value !== null && "kind" in value && "message" in value;
}

async function call<C extends Command>(command: C, args: Commands[C]["args"]): Promise<Commands[C]["result"]> {
  try {
    return await invoke<Commands[C]["result"]>(command, args as InvokeArgs);
  } catch (error) {
    if (isCommandError(error)) throw new ConsoleFailure(error);
    throw new ConsoleFailure({ kind: "internal", message: String(error), line: null });
  }
}

/** Every command, typed from src-tauri/src/commands.rs (bindings/Commands.ts): a renamed or
 * retyped argument fails the type check here and at every caller. */
export const api = commands(call);

export function onConsoleEvent(handler: (event: ConsoleEvent) => void): Promise<UnlistenFn> {
  return listen<ConsoleEvent>("console", (e) => handler(e.payload));
}

/** The native open dialog for a file of messages; null when cancelled. */
export async function pickMessageFile(): Promise<string | null> {
  const picked = await open({
    multiple: false,
    directory: false,
    filters: [{ name: "Messages", extensions: ["csv", "jsonl", "ndjson", "txt"] }],
  });
  return typeof picked === "string" ? picked : null;
}

/** The native open dialog for a labelled dataset; null when cancelled. */
export async function pickDatasetFile(): Promise<string | null> {
  const picked = await open({
    multiple: false,
    directory: false,
    filters: [{ name: "Labelled messages", extensions: ["jsonl", "json", "ndjson", "csv"] }],
  });
  return typeof picked === "string" ? picked : null;
}
