// End to end: the real built app, the real model, in WebKitGTK driven through tauri-driver.
// scripts/e2e.sh sets the environment (a fresh data folder, a copy of the templates, Xvfb).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { Driver, Keys } from "./webdriver.mjs";

const DRIVER = process.env.AEGIS_WEBDRIVER ?? "http://127.0.0.1:4444";
const APP = process.env.AEGIS_APP;
const PROMPTS = process.env.AEGIS_PROMPTS;
const SHOTS = process.env.AEGIS_SCREENSHOTS ?? "screenshots";
const HTTP_PORT = Number(process.env.AEGIS_E2E_HTTP_PORT ?? 18_765);
const FIXTURE = path.resolve(import.meta.dirname, "fixtures/messages.csv");
const LABELLED = path.resolve(import.meta.dirname, "fixtures/labelled.csv");
const NEW_POSITIVES = path.resolve(import.meta.dirname, "../../docs/examples/personal-data-requests.jsonl");
const CANDIDATES = path.resolve(import.meta.dirname, "fixtures/teach-candidates.jsonl");
const HELD_OUT_REQUESTS = path.resolve(import.meta.dirname, "../../docs/examples/personal-data-requests-holdout.jsonl");

let d;
const timings = {};

async function shot(name) {
  fs.mkdirSync(SHOTS, { recursive: true });
  fs.writeFileSync(path.join(SHOTS, `${name}.png`), await d.screenshot());
}

async function go(screen) {
  await d.click(await d.find(`[data-testid="nav-${screen}"]`));
}

const attr = (name, want) => async (id) => (await d.attribute(id, name)) === want;

async function check(text) {
  await go("check");
  const input = await d.waitFor('[data-testid="check-input"]');
  await d.clear(input);
  await d.type(input, text);
  const before = await d.execute("return document.querySelector('[data-testid=verdict]')?.outerHTML ?? ''");
  await d.type(input, Keys.ctrl + Keys.enter);
  await d.waitFor('[data-testid="verdict"]', {
    timeout: 60_000,
    accept: async () =>
      (await d.execute("return document.querySelector('[data-testid=verdict]').outerHTML")) !== before,
  });
  return d.execute(
    "return [...document.querySelectorAll('[data-testid^=result-]')].map(e => ({key: e.dataset.testid.slice(7), passed: e.dataset.passed === 'true', score: Number(e.dataset.score), decidedBy: e.dataset.decidedBy}))",
  );
}

async function historyCount() {
  await go("history");
  const el = await d.waitFor('[data-testid="history-count"]');
  await new Promise((r) => setTimeout(r, 500));
  return Number(await d.attribute(el, "data-count"));
}

/** Replaces the editor line starting with `prefix` by `line`, with the keyboard. */
async function editLine(prefix, line) {
  const lines = await d.findAll(".cm-line");
  for (const id of lines) {
    if ((await d.text(id)).startsWith(prefix)) {
      await d.click(id);
      await d.keys([Keys.end, [Keys.shift, Keys.home]]);
      await d.typeKeys(line);
      return;
    }
  }
  throw new Error(`no editor line starts with ${prefix}`);
}

before(async () => {
  assert.ok(APP, "AEGIS_APP names the built app");
  const launched = Date.now();
  d = await Driver.start(DRIVER, APP);
  await d.waitFor('[data-testid="nav-check"]', { timeout: 60_000 });
  timings.launch_to_window_ms = Date.now() - launched;
  await d.waitFor('[data-testid="model-status"]', { timeout: 180_000, accept: attr("data-status", "ready") });
  timings.launch_to_model_ready_ms = Date.now() - launched;
  await shot("00-launch");
});

after(async () => {
  if (!d) return;
  try {
    const info = await d.execute("return window.__TAURI_INTERNALS__.invoke('app_info')");
    timings.memory_after_load_bytes = info?.memory_bytes ?? null;
  } catch (e) {
    timings.memory_error = String(e);
  }
  fs.mkdirSync(SHOTS, { recursive: true });
  fs.writeFileSync(path.join(SHOTS, "timings.json"), JSON.stringify(timings, null, 2));
  await d.quit().catch(() => {});
});

test("the status bar names the device and weight format in use", async () => {
  const status = await d.find('[data-testid="model-status"]');
  const text = await d.text(status);
  assert.match(text, /on cpu/, text);
  // Beside the encoder the shipped heads read, the guard model keeps its file's quantized blocks
  // on CPU: it decides nothing on the hot path when every validator has a head.
  assert.match(text, /\(quantized\)/, text);
  assert.equal((await d.findAll('[data-testid="synthetic-warning"]')).length, 0);
});

test("a toxic Indonesian message fails with a rejection message", async () => {
  const results = await check("Dasar goblok, otak udang kamu! Tolol banget.");
  const verdict = await d.find('[data-testid="verdict"]');
  assert.equal(await d.attribute(verdict, "data-status"), "failed");
  assert.ok(results.find((r) => r.key === "toxic" && !r.passed), JSON.stringify(results));
  const rejection = await d.text(await d.find('[data-testid="rejection-message"]'));
  assert.match(rejection, /maaf/i);
  await shot("01-check");
});

test("a conversation's last turn is judged in its context, and history shows the context", async () => {
  await go("check");
  await d.click(await d.waitFor('[data-testid="mode-conversation"]'));
  await d.type(await d.waitFor('[data-testid="turn-text-0"]'), "you think you can ignore me after what you said?");
  await d.click(await d.find('[data-testid="turn-add"]'));
  // The added turn alternates to the assistant; this conversation is one user's two messages.
  await d.execute(
    "const s = document.querySelector('[data-testid=turn-role-1]'); s.value = 'user'; s.dispatchEvent(new Event('change'));",
  );
  await d.type(await d.waitFor('[data-testid="turn-text-1"]'), "I know which school your kids go to");
  await d.click(await d.find('[data-testid="check-run"]'));
  // Switching modes cleared the last message's result; this one shows the turn's context.
  const context = await d.text(await d.waitFor('[data-testid="turn-context"]', { timeout: 60_000 }));
  assert.match(context, /ignore me after what you said/, context);
  assert.match(context, /turn 1 \(user\)/, context);
  const harassment = await d.find('[data-testid="result-harassment"]');
  assert.equal(await d.attribute(harassment, "data-passed"), "false");
  await d.waitFor('[data-testid="turned-in_context-harassment"]');
  await shot("01b-conversation");

  await go("history");
  await d.click(await d.waitFor(".line"));
  await d.waitFor('[data-testid="history-detail"]');
  const stored = await d.text(await d.waitFor('[data-testid="turn-context"]'));
  assert.match(stored, /ignore me after what you said/, stored);
  await d.waitFor('[data-testid="history-turned-in_context-harassment"]');
  await go("check");
  await d.click(await d.waitFor('[data-testid="mode-message"]'));
});

test("importing a CSV runs to the end and grows history", async () => {
  const before = await historyCount();
  await go("import");
  await d.type(await d.waitFor('[data-testid="import-path"]'), FIXTURE);
  await d.click(await d.find('[data-testid="import-open"]'));
  await d.waitFor('[data-testid="import-column"]');
  await d.click(await d.find('[data-testid="import-run"]'));
  await d.waitFor('[data-testid="import-summary"]', { timeout: 120_000, accept: attr("data-complete", "true") });
  const progress = await d.find('[data-testid="import-progress"]');
  assert.equal(await d.attribute(progress, "data-done"), "3");
  assert.equal(await d.attribute(progress, "data-total"), "3");
  await shot("02-import");
  assert.equal(await historyCount(), before + 3);
  await d.click(await d.waitFor(".line"));
  await d.waitFor('[data-testid="history-detail"]');
  await shot("04-history");
});

test("two items are reviewed with the keyboard", async () => {
  await go("review");
  const counter = await d.waitFor('[data-testid="review-remaining"]', {
    accept: async (id) => Number(await d.attribute(id, "data-remaining")) >= 2,
  });
  const start = Number(await d.attribute(counter, "data-remaining"));
  // The batch is claimed for this console's reviewer: the team's other consoles are not handed it.
  await d.waitFor('[data-testid="review-claimed"]');
  await d.click(await d.find('[data-testid="review-list"]'));
  await d.keys(["a"]);
  await d.waitFor('[data-testid="review-remaining"]', { accept: attr("data-remaining", String(start - 1)) });
  await d.keys(["o"]);
  await d.waitFor('[data-testid="review-remaining"]', { accept: attr("data-remaining", String(start - 2)) });
  await d.keys(["u"]);
  await d.waitFor('[data-testid="review-remaining"]', { accept: attr("data-remaining", String(start - 1)) });
  await d.keys(["o"]);
  await d.waitFor('[data-testid="review-remaining"]', { accept: attr("data-remaining", String(start - 2)) });
  await shot("03-review");
});

test("an evaluation shows metrics, a threshold slider recomputes them, apply writes the template", async () => {
  await go("eval");
  // One reviewer so far: nothing decided twice to measure agreement on.
  await d.waitFor('[data-testid="agreement-none"]');
  await d.type(await d.waitFor('[data-testid="eval-path"]'), LABELLED);
  await d.click(await d.find('[data-testid="eval-run"]'));
  await d.waitFor('[data-testid="eval-report"]', { timeout: 180_000 });
  const validators = await d.execute(
    "return [...document.querySelectorAll('[data-testid=eval-metrics] tr[data-lang=all]')].map(r => r.dataset.validator)",
  );
  assert.deepEqual(validators, ["spam", "toxic", "harassment", "financial_advice"]);
  const slide = async (value) => {
    await d.execute(
      `const s = document.querySelector('[data-testid=eval-threshold-toxic]'); s.value = '${value}'; s.dispatchEvent(new Event('input', { bubbles: true }));`,
    );
    const live = await d.waitFor('[data-testid="eval-live-toxic"]');
    return Number((await d.attribute(live, "data-recall")) ?? "NaN");
  };
  const lenient = await slide("0.01");
  const strict = await slide("0.99");
  assert.ok(lenient >= strict, `recall at 0.01 (${lenient}) >= at 0.99 (${strict})`);
  await slide("0.4");
  await d.execute("document.querySelector('[data-testid=eval-validator-toxic]').scrollIntoView()");
  await shot("08-eval");
  await d.click(await d.find('[data-testid="eval-apply-toxic"]'));
  await d.waitFor('[data-testid="eval-notice"]');
  const template = fs.readFileSync(path.join(PROMPTS, "toxic.txt"), "utf8");
  assert.match(template, /\nthreshold: 0\.4\n/);
});

// Before the template tests below lower a threshold, which would cut a clean answer too.
/** An OpenAI-compatible chat server that streams a scripted answer a word at a time: clean
 * sentences, and when the user asks about the neighbour, an insult to the reader after the first. */
function scriptedUpstream() {
  const server = http.createServer((request, response) => {
    let body = "";
    request.on("data", (piece) => (body += piece));
    request.on("end", async () => {
      const asked = JSON.parse(body);
      const last = asked.messages.at(-1).content;
      const answer = last.includes("neighbour")
        ? "The weather is mild today. You are a worthless stupid idiot and everyone hates you, you disgusting pig. Drink some water."
        : "The weather is mild today. Many people enjoy a walk in the park. Drink some water.";
      response.writeHead(200, { "content-type": "text/event-stream" });
      const chunk = (delta, finish = null) =>
        `data: ${JSON.stringify({ id: "up", object: "chat.completion.chunk", created: 1, model: "scripted", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      for (const word of answer.split(/(?= )/)) {
        if (response.destroyed) return;
        response.write(chunk({ content: word }));
        await new Promise((r) => setTimeout(r, 15));
      }
      response.end(chunk({}, "stop") + "data: [DONE]\n\n");
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

test("the Playground streams an answer through the guard, shows its checks, and cuts an insult", async () => {
  const upstream = await scriptedUpstream();
  try {
    await go("settings");
    const field = await d.waitFor('[data-testid="http-upstream"]');
    await d.clear(field);
    await d.type(field, `http://127.0.0.1:${upstream.address().port}`);
    await d.click(await d.find('[data-testid="settings-save"]'));
    await d.waitFor('[data-testid="settings-notice"]');

    await go("playground");
    const send = async (message) => {
      const input = await d.waitFor('[data-testid="playground-input"]');
      await d.type(input, message);
      await d.click(await d.find('[data-testid="playground-send"]'));
    };
    await send("How is the weather today?");
    const first = await d.waitFor('[data-testid="playground-exchange-0"] [data-testid="playground-answer"]', {
      timeout: 60_000,
      accept: async (id) => (await d.attribute(id, "data-finish")) !== "",
    });
    assert.equal(await d.attribute(first, "data-finish"), "stop");
    assert.match(await d.text(first), /Drink some water/);
    const passed = await d.execute(
      "return [...document.querySelectorAll('[data-testid^=playground-check-0-]')].map(r => r.dataset.passed)",
    );
    assert.ok(passed.length >= 2, `a check per sentence: ${passed}`);
    assert.ok(passed.every((p) => p === "true"), `${passed}`);

    await send("And what about my neighbour?");
    const second = await d.waitFor('[data-testid="playground-exchange-1"] [data-testid="playground-answer"]', {
      timeout: 60_000,
      accept: async (id) => (await d.attribute(id, "data-finish")) !== "",
    });
    assert.equal(await d.attribute(second, "data-finish"), "content_filter");
    const shown = await d.text(second);
    assert.doesNotMatch(shown, /worthless/, "nothing unchecked is shown");
    assert.doesNotMatch(shown, /Drink some water/, "the rest was cut");
    const cut = await d.find('[data-testid="playground-exchange-1"] [data-testid="playground-cut"]');
    assert.ok(Number(await d.attribute(cut, "data-offset")) > 0);
    await shot("10-playground");
  } finally {
    upstream.close();
  }
});

test("a saved template changes the very next verdict", async () => {
  const message = "Selamat pagi, bagaimana cara mengganti kata sandi akun saya?";
  const before = await check(message);
  const target = before.filter((r) => r.passed).sort((a, b) => b.score - a.score)[0];
  assert.ok(target, JSON.stringify(before));
  const threshold = Math.max(target.score / 2, 1e-6).toPrecision(3);
  await go("templates");
  await d.click(await d.waitFor(`[data-testid="template-${target.key}"]`));
  await d.waitFor(".cm-line");
  await editLine("threshold:", `threshold: ${threshold}`);
  await d.click(await d.find('[data-testid="template-save"]'));
  await d.waitFor('[data-testid="template-status"]');
  await shot("05-templates");
  const after = await check(message);
  assert.equal(after.find((r) => r.key === target.key)?.passed, false, JSON.stringify(after));
});

/** Sets a form field's value as typing would (long texts through key events are slow). */
async function fill(testid, value) {
  await d.execute(
    `const e = document.querySelector('[data-testid=${testid}]'); e.value = arguments[0]; e.dispatchEvent(new Event('input', { bubbles: true }));`,
    [value],
  );
}

test("a validator taught from examples decides by its head, learns a mark, and reverts", async () => {
  const key = "personal_data_request";
  await go("teach");
  await d.click(await d.waitFor('[data-testid="teach-new"]'));
  await d.waitFor('[data-testid="new-validator"]');
  const positives = fs
    .readFileSync(NEW_POSITIVES, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l).text);
  await fill("new-key", key);
  await fill("new-name", "Personal data request");
  await fill("new-policy", "The message must not ask the reader for OTP codes, PINs, passwords, card numbers or ID documents.");
  await fill("new-rejection-id", "Maaf, pesan ini meminta data pribadi yang tidak boleh dibagikan.");
  await fill("new-rejection-en", "Sorry, this message asks for personal data that must never be shared.");
  await fill("new-positives", positives.join("\n"));
  await d.click(await d.find('[data-testid="new-create"]'));
  await d.waitFor(`[data-testid="teach-${key}"]`, { timeout: 30_000, accept: attr("data-scored-by", "prompt") });

  const tooFew = [];
  const trainAndApply = async (shotName) => {
    await d.click(await d.waitFor('[data-testid="train"]'));
    const report = await d.waitFor('[data-testid="train-report"]', { timeout: 300_000 });
    const auc = Number(await d.attribute(report, "data-auc"));
    // The author's own examples come first; positives alone are too few to measure on.
    const yours = await d.find('[data-testid="on-your-examples"]');
    tooFew.push((await d.attribute(yours, "data-too-few")) === "true");
    if (shotName) await shot(shotName);
    await d.click(await d.find('[data-testid="apply"]'));
    await d.waitFor('[data-testid="teach-notice"]', { accept: async (id) => (await d.text(id)).startsWith("Applied") });
    await d.waitFor(`[data-testid="teach-${key}"]`, { timeout: 30_000, accept: attr("data-scored-by", "head") });
    return auc;
  };
  const auc = await trainAndApply("09-teach");
  assert.ok(auc > 0.8, `held-out ROC AUC ${auc}`);
  assert.deepEqual(tooFew, [true], "violating examples alone say nothing about the policy's line");

  const request = await check("Hey, read me the code we just sent to your number so we can finish the upgrade.");
  const decided = request.find((r) => r.key === key);
  assert.equal(decided?.decidedBy, "head", JSON.stringify(request));
  assert.equal(decided?.passed, false, JSON.stringify(request));

  // A warning never to share a code reads like a request to a head taught on requests alone.
  let wrong = null;
  for (const text of [
    "Never share your OTP with anyone, including our staff.",
    "Jangan pernah berikan kode OTP kepada siapa pun, termasuk petugas kami.",
    "I never got the OTP, can you resend it to my phone?",
    "Kode OTP saya nggak masuk-masuk, bisa dikirim ulang?",
  ]) {
    const results = await check(text);
    if (results.find((r) => r.key === key)?.passed === false) {
      wrong = text;
      break;
    }
  }
  assert.ok(wrong, "one of the hard benign messages fails the first head");
  await d.click(await d.find(`[data-testid="mark-${key}"]`));
  await d.waitFor(`[data-testid="marked-${key}"]`);

  await go("teach");
  await d.click(await d.waitFor(`[data-testid="teach-${key}"]`));
  await d.waitFor('[data-testid="example-row"][data-violates="false"]');
  await trainAndApply(null);
  const fixedVerdict = (await check(wrong)).find((r) => r.key === key);
  assert.equal(fixedVerdict?.passed, true, `after the mark and a retrain: ${JSON.stringify(fixedVerdict)}`);

  await go("teach");
  await d.click(await d.waitFor(`[data-testid="teach-${key}"]`));
  const listed = () =>
    d.execute("return [...document.querySelectorAll('[data-testid=head-version]')].map(r => Number(r.dataset.version))");
  // The version list loads after the validator is chosen: wait for both versions to be listed.
  await d.waitFor('[data-testid="head-version"]', { accept: async () => (await listed()).length >= 2 }).catch(() => {});
  const versions = await listed();
  assert.equal(versions.length, 2, JSON.stringify(versions));
  await d.click(await d.find(`[data-testid="revert-${versions[1]}"]`));
  await d.waitFor('[data-testid="teach-notice"]', { accept: async (id) => (await d.text(id)).includes("live again") });
  const reverted = (await check(wrong)).find((r) => r.key === key);
  assert.equal(reverted?.passed, false, `the first head again: ${JSON.stringify(reverted)}`);
});

test("the labelling queue suggests near misses, learns labels given with the keys, and a retrained head passes one", async () => {
  // Runs after the test above: personal_data_request is back on its first head, taught on
  // requests alone, which flags warnings and questions about codes.
  const key = "personal_data_request";
  const labelOf = new Map(
    fs
      .readFileSync(CANDIDATES, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l))
      .map((row) => [row.text, row.labels[key]]),
  );
  await go("teach");
  await d.click(await d.waitFor(`[data-testid="teach-${key}"]`));
  await d.waitFor('[data-testid="label-queue"]');
  await fill("suggest-path", CANDIDATES);
  await d.click(await d.find('[data-testid="suggest"]'));
  const queue = await d.waitFor('[data-testid="suggestions"]', { timeout: 120_000 });
  await d.waitFor('[data-testid="suggestion-current"]');
  await shot("10-label-queue");
  const left = () => d.execute("return document.querySelectorAll('[data-testid=suggestions] [role=option]').length");
  await d.click(queue);
  let flaggedNearMiss = null;
  let taught = 0;
  while ((await left()) > 0) {
    const current = await d.find('[data-testid="suggestion-current"]');
    const text = await d.attribute(current, "data-text");
    const fails = (await d.attribute(current, "data-fails")) === "true";
    const label = labelOf.get(text);
    // Messages from history carry no label here: skipped, as an author skips what is unclear.
    const keyPressed = label === undefined ? "s" : label ? "f" : "p";
    if (label === false && fails) flaggedNearMiss ??= text;
    if (label !== undefined) taught += 1;
    const before = await left();
    await d.keys([keyPressed]);
    await d.waitFor('[data-testid="suggestions"]', { accept: async () => (await left()) === before - 1 });
  }
  assert.ok(flaggedNearMiss, "the first head flags a suggested near miss");
  await d.waitFor('[data-testid="queue-taught"]', { accept: attr("data-taught", String(taught)) });
  const examples = await d.execute("return document.querySelectorAll('[data-testid=example-row]').length");
  assert.ok(examples > 0);

  // R trains again on what was labelled; the report comes, Apply makes it live.
  await d.keys(["r"]);
  await d.waitFor('[data-testid="train-report"]', { timeout: 300_000 });
  await d.click(await d.find('[data-testid="apply"]'));
  await d.waitFor('[data-testid="teach-notice"]', { accept: async (id) => (await d.text(id)).startsWith("Applied") });
  const after = (await check(flaggedNearMiss)).find((r) => r.key === key);
  assert.equal(after?.passed, true, `${flaggedNearMiss} after the queue's labels and a retrain: ${JSON.stringify(after)}`);
});

test("the author moves the line up the trade-off curve, and a message the tuned line flagged passes", async () => {
  // Runs after the test above: personal_data_request's live head is the one its labels trained,
  // at the tuned line. Training again on the same examples gives the same head and curve.
  const key = "personal_data_request";
  const requests = fs
    .readFileSync(HELD_OUT_REQUESTS, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l))
    .filter((row) => row.labels[key])
    .map((row) => row.text);
  const flagged = [];
  for (const text of requests) {
    const result = (await check(text)).find((r) => r.key === key);
    if (result?.passed === false) flagged.push({ text, score: result.score });
  }
  assert.ok(flagged.length > 0, "the tuned line flags some requests it never saw");
  flagged.sort((a, b) => a.score - b.score);

  await go("teach");
  await d.click(await d.waitFor(`[data-testid="teach-${key}"]`));
  await d.click(await d.waitFor('[data-testid="train"]'));
  await d.waitFor('[data-testid="train-report"]', { timeout: 300_000 });
  await d.waitFor('[data-testid="trade-off"]');
  await shot("11-trade-off");
  const places = await d.execute(
    "return [...document.querySelectorAll('[data-testid=place-line]')].map(b => Number(b.dataset.threshold))",
  );
  // The lowest-scoring flagged request, and the first place above it: the line moves just past it.
  const target = flagged.find((f) => places.some((t) => t > f.score));
  assert.ok(target, `a place above a flagged request: places ${places}, flagged ${JSON.stringify(flagged)}`);
  const place = Math.min(...places.filter((t) => t > target.score));
  await d.click(await d.find(`[data-testid="place-line"][data-threshold="${place}"]`));
  await d.waitFor('[data-testid="trained-threshold"]', { accept: async (id) => Number(await d.text(id)) === place });
  await d.click(await d.find('[data-testid="apply"]'));
  await d.waitFor('[data-testid="teach-notice"]', {
    accept: async (id) => (await d.text(id)).includes(`threshold ${place.toFixed(3)}`),
  });
  const after = (await check(target.text)).find((r) => r.key === key);
  assert.equal(after?.passed, true, `${target.text} at the line placed at ${place}: ${JSON.stringify(after)}`);
});

test("a broken template shows its error inline while the other validators work", async () => {
  await go("templates");
  await d.click(await d.waitFor('[data-testid="template-toxic"]'));
  await d.waitFor(".cm-line");
  await editLine("threshold:", "threshold: 7");
  await d.click(await d.find('[data-testid="template-save"]'));
  const problem = await d.waitFor('[data-testid="template-problem"]');
  // The line is read from the file, so the test follows the template's front matter as it grows.
  const thresholdLine =
    fs.readFileSync(path.join(PROMPTS, "toxic.txt"), "utf8").split("\n").findIndex((l) => l.startsWith("threshold:")) + 1;
  assert.match(await d.text(problem), new RegExp(`Line ${thresholdLine}: threshold must be between 0 and 1`));
  await d.waitFor(".cm-lint-marker-error, .cm-lintRange-error");
  await shot("06-template-error");

  // Broken on disk by another editor: the guard reloads without it, the rest keep working.
  fs.writeFileSync(path.join(PROMPTS, "spam.txt"), "---\nname: Spam\nthreshold: [\n---\n{{message}}\n");
  await d.waitFor('[data-testid="template-spam"]', {
    timeout: 15_000,
    accept: async (id) => (await d.text(id)).includes("broken"),
  });
  // The list reads the files; the guard reloads from the watcher's event. An earlier reload's
  // event can refresh the list first, so check until the reloaded guard answers (or time out).
  let results = [];
  for (const deadline = Date.now() + 15_000; ; ) {
    results = await check("Dasar goblok, otak udang kamu! Tolol banget.");
    if (!results.some((r) => r.key === "spam") || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  const keys = results.map((r) => r.key).sort();
  assert.deepEqual(keys, ["financial_advice", "harassment", "personal_data_request", "toxic"]);
  assert.equal(results.find((r) => r.key === "toxic")?.passed, false);
});

test("the HTTP endpoint turns on and answers /health", async () => {
  await go("settings");
  await d.click(await d.waitFor('[data-testid="http-enabled"]'));
  const port = await d.find('[data-testid="http-port"]');
  await d.clear(port);
  await d.type(port, String(HTTP_PORT));
  await d.click(await d.find('[data-testid="settings-save"]'));
  await d.waitFor('[data-testid="http-status"]', { accept: attr("data-running", "true") });
  const res = await fetch(`http://127.0.0.1:${HTTP_PORT}/health`);
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.equal(body.status, "healthy", JSON.stringify(body));
  await shot("07-settings");

  // A page on another origin is refused before its body is read; a client's feedback is only a
  // proposal until a reviewer accepts it in the Teach view.
  const feedback = (headers) =>
    fetch(`http://127.0.0.1:${HTTP_PORT}/feedback`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify({ validator: "toxic", violates: true, text: "kamu memang tidak berguna sama sekali", lang: "id" }),
    });
  assert.equal((await feedback({ origin: "http://attacker.example" })).status, 403);
  const proposed = await feedback({});
  assert.equal(proposed.status, 201);
  assert.equal((await proposed.json()).pending, true);
  await go("teach");
  await d.click(await d.waitFor('[data-testid="teach-toxic"]'));
  await d.click(await d.waitFor('[data-testid="example-accept"]'));
  await d.waitFor('[data-testid="example-row"]', {
    accept: async () => (await d.execute("return document.querySelectorAll('[data-testid=example-pending]').length")) === 0,
  });
});

test("a team starts with its first admin, names a reviewer, and the audit log says who changed what", async () => {
  await go("settings");
  await d.waitFor('[data-testid="team-none"]');
  await d.click(await d.find('[data-testid="team-start"]'));
  await d.click(await d.find('[data-testid="team-add"]'));
  await d.waitFor('[data-testid="team-members"] tr[data-role="admin"]');
  await d.type(await d.find('[data-testid="team-name"]'), "budi");
  await d.click(await d.find('[data-testid="team-role"] option[value="reviewer"]'));
  await d.click(await d.find('[data-testid="team-add"]'));
  await d.waitFor('[data-testid="team-members"] tr[data-member="budi"]', { accept: attr("data-role", "reviewer") });
  // The earlier tests' template saves and decisions are in the log, under the console's name.
  await d.waitFor('[data-testid="audit-log"] tr[data-action="template saved"]');
  await d.waitFor('[data-testid="audit-log"] tr[data-action="member set"]');
  await shot("12-team");
});

test("a reviewer's example is a proposal, which they may withdraw before an author accepts it", async () => {
  // The previous test named budi a reviewer; this console now acts as budi.
  await go("settings");
  const name = await d.waitFor('[data-testid="reviewer-name"]');
  await d.clear(name);
  await d.type(name, "budi");
  await d.click(await d.find('[data-testid="settings-save"]'));
  await go("teach");
  await d.click(await d.waitFor('[data-testid="teach-toxic"]'));
  await d.waitFor('[data-testid="examples-proposed-note"]');
  await d.type(await d.find('[data-testid="example-input"]'), "budi thinks this one is rude, you clown");
  await d.click(await d.find('[data-testid="example-fail"]'));
  await d.click(await d.waitFor('[data-testid="example-withdraw"]'));
  await d.waitFor('[data-testid="examples"]', {
    accept: async () =>
      (await d.execute(
        "return [...document.querySelectorAll('[data-testid=example-row]')].some((r) => r.textContent.includes('you clown'))",
      )) === false,
  });
  await go("settings");
  await d.waitFor('[data-testid="audit-log"] tr[data-action="example withdrawn"]');
  await shot("13-withdrawn");
});
