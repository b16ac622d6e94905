// The one module that talks to Tauri: every command, event and dialog goes through here, typed
// with the bindings generated from the Rust definitions.
import { invoke } from "@tauri-apps/api/core";
import { listen, type UnlistenFn } from "@tauri-apps/api/event";
import { open } from "@tauri-apps/plugin-dialog";

import type { AppInfo } from "../bindings/AppInfo";
import type { CheckResult } from "../bindings/CheckResult";
import type { CommandError } from "../bindings/CommandError";
import type { Comparison } from "../bindings/Comparison";
import type { ConsoleEvent } from "../bindings/ConsoleEvent";
import type { Decision } from "../bindings/Decision";
import type { EvalRunSummary } from "../bindings/EvalRunSummary";
import type { EvalView } from "../bindings/EvalView";
import type { Exported } from "../bindings/Exported";
import type { FilePreview } from "../bindings/FilePreview";
import type { HistoryPage } from "../bindings/HistoryPage";
import type { HistoryQuery } from "../bindings/HistoryQuery";
import type { HttpStatus } from "../bindings/HttpStatus";
import type { ImportSummary } from "../bindings/ImportSummary";
import type { Command } from "../bindings/Command";
import type { ErrorKind } from "../bindings/ErrorKind";
import type { ModelState } from "../bindings/ModelState";
import type { PlaygroundRequest } from "../bindings/PlaygroundRequest";
import type { ReviewQueue } from "../bindings/ReviewQueue";
import type { Settings } from "../bindings/Settings";
import type { TemplateFile } from "../bindings/TemplateFile";
import type { TemplateSave } from "../bindings/TemplateSave";
import type { TryRow } from "../bindings/TryRow";
import type { VerdictDetail } from "../bindings/VerdictDetail";
import type { AppliedHead } from "../bindings/AppliedHead";
import type { HeadVersion } from "../bindings/HeadVersion";
import type { NewValidator } from "../bindings/NewValidator";
import type { StoredExample } from "../bindings/StoredExample";
import type { Suggestion } from "../bindings/Suggestion";
import type { TeachValidator } from "../bindings/TeachValidator";
import type { TrainReport } from "../bindings/TrainReport";
import type { Turn } from "../bindings/Turn";
import type { TurnsChecked } from "../bindings/TurnsChecked";

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

async function call<T>(command: Command, args?: Record<string, unknown>): Promise<T> {
  try {
    return await invoke<T>(command, args);
  } catch (error) {
    if (isCommandError(error)) throw new ConsoleFailure(error);
    throw new ConsoleFailure({ kind: "internal", message: String(error), line: null });
  }
}

export const api = {
  appInfo: () => call<AppInfo>("app_info"),
  modelState: () => call<ModelState>("model_state"),
  check: (text: string) => call<CheckResult>("check", { text }),
  /** The last turn, or every turn, each in the context of the turns before it. */
  checkConversation: (turns: Turn[], checked: TurnsChecked) =>
    call<CheckResult[]>("check_conversation", { turns, checked }),
  /** Talks to the chat upstream through the guard; steps come as `playground` events. */
  playgroundSend: (playgroundId: string, request: PlaygroundRequest) =>
    call<null>("playground_send", { playgroundId, request }),
  previewFile: (path: string) => call<FilePreview>("preview_file", { path }),
  importFile: (importId: string, path: string, column: string | null) =>
    call<ImportSummary>("import_file", { importId, path, column }),
  /** Stops a running import or evaluation by the id it was started with. */
  cancelRun: (runId: string) => call<boolean>("cancel_run", { runId }),
  reviewQueue: (limit: number) => call<ReviewQueue>("review_queue", { limit }),
  review: (verdictId: number, decision: Decision, note: string) =>
    call<number>("review", { verdictId, decision, note }),
  undoReview: (reviewId: number) => call<boolean>("undo_review", { reviewId }),
  history: (query: HistoryQuery, after: string | null, limit: number) =>
    call<HistoryPage>("history", { query, after, limit }),
  historyCount: (query: HistoryQuery) => call<number>("history_count", { query }),
  verdict: (verdictId: number) => call<VerdictDetail>("verdict", { verdictId }),
  /** Opens the native save dialog (from the app, so the window never names the file); null when cancelled. */
  exportHistory: (query: HistoryQuery) => call<Exported | null>("export_history", { query }),
  templates: () => call<TemplateFile[]>("templates"),
  saveTemplate: (key: string, content: string) => call<TemplateSave>("save_template", { key, content }),
  templateVersions: (key: string) => call<TemplateSave[]>("template_versions", { key }),
  tryTemplate: (key: string, content: string, messages: string[]) =>
    call<TryRow[]>("try_template", { key, content, messages }),
  settings: () => call<Settings>("settings"),
  updateSettings: (settings: Settings) => call<Settings>("update_settings", { settings }),
  httpStatus: () => call<HttpStatus>("http_status"),
  evaluate: (evalId: string, path: string, limit: number | null, seed: number | null) =>
    call<EvalView>("evaluate", { evalId, path, limit, seed }),
  evalRuns: () => call<EvalRunSummary[]>("eval_runs"),
  evalRun: (runId: number, thresholds: Record<string, number>) =>
    call<EvalView>("eval_run", { runId, thresholds }),
  compareRuns: (baseline: number, candidate: number) =>
    call<Comparison>("compare_runs", { baseline, candidate }),
  deleteEvalRun: (runId: number) => call<boolean>("delete_eval_run", { runId }),
  applyThreshold: (key: string, threshold: number) =>
    call<TemplateSave>("apply_threshold", { key, threshold }),
  teachValidators: () => call<TeachValidator[]>("teach_validators"),
  examples: (validator: string) => call<StoredExample[]>("examples", { validator }),
  addExample: (validator: string, text: string, violates: boolean) =>
    call<number>("add_example", { validator, text, violates }),
  /** "Should fail" / "should pass" on a recorded verdict: its text becomes an example. */
  markVerdict: (verdictId: number, validator: string, violates: boolean) =>
    call<number>("mark_verdict", { verdictId, validator, violates }),
  relabelExample: (id: number, violates: boolean) => call<number>("relabel_example", { id, violates }),
  removeExample: (id: number) => call<boolean>("remove_example", { id }),
  acceptExample: (id: number) => call<boolean>("accept_example", { id }),
  createValidator: (validator: NewValidator) => call<string>("create_validator", { validator }),
  /** Trains a head; progress arrives as `train` events, `cancelRun(trainId)` stops it. */
  trainHead: (trainId: string, validator: string) => call<TrainReport>("train_head", { trainId, validator }),
  /** The messages to label next: history, the benign pool and `files`, scored by the trained
   * head waiting to be applied, else the live one. */
  suggestExamples: (validator: string, files: string[], wanted: number) =>
    call<Suggestion[]>("suggest_examples", { validator, files, wanted }),
  applyHead: (validator: string) => call<AppliedHead>("apply_head", { validator }),
  headVersions: (validator: string) => call<HeadVersion[]>("head_versions", { validator }),
  revertHead: (version: number) => call<AppliedHead>("revert_head", { version }),
};

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
