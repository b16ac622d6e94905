// End to end, a team: two consoles, each the real app in a window of its own under a
// tauri-driver of its own, two reviewers sharing one history on a real PostgreSQL.
// scripts/e2e.sh starts the throwaway server (AEGIS_E2E_POSTGRES_URL) and Xvfb (DISPLAY).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Driver } from "./webdriver.mjs";

const APP = process.env.AEGIS_APP;
const DATABASE = process.env.AEGIS_E2E_POSTGRES_URL;
const SHOTS = process.env.AEGIS_SCREENSHOTS ?? "screenshots";
// Two ports from here on for the two tauri-drivers (and each one's native port 1000 above).
const FIRST_PORT = Number(process.env.AEGIS_E2E_TEAM_PORT ?? 4910);
const FIXTURE = path.resolve(import.meta.dirname, "fixtures/messages.csv");

let rina;
let budi;

/**
 * One reviewer's console: a tauri-driver of its own launching the app with a data folder of its
 * own, whose settings name the reviewer and the team's database as the Settings screen would.
 */
async function openConsole(reviewer, port) {
  const data = fs.mkdtempSync(path.join(os.tmpdir(), `aegis-e2e-${reviewer}-`));
  fs.writeFileSync(path.join(data, "settings.json"), JSON.stringify({ reviewer, database: DATABASE }));
  fs.mkdirSync(SHOTS, { recursive: true });
  const log = fs.openSync(path.join(SHOTS, `app-${reviewer}.log`), "w");
  const driver = spawn("tauri-driver", ["--port", String(port), "--native-port", String(port + 1000)], {
    env: { ...process.env, AEGIS_DATA_DIR: data },
    stdio: ["ignore", log, log],
  });
  const base = `http://127.0.0.1:${port}`;
  for (let tries = 0; ; tries++) {
    const up = await fetch(`${base}/status`).then((r) => r.ok, () => false);
    if (up) break;
    if (tries > 100) throw new Error(`${reviewer}'s tauri-driver did not start on port ${port}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const d = await Driver.start(base, APP);
  await d.waitFor('[data-testid="model-status"]', {
    timeout: 180_000,
    accept: async (id) => (await d.attribute(id, "data-status")) === "ready",
  });
  return { reviewer, d, driver, data };
}

async function go(d, screen) {
  await d.click(await d.find(`[data-testid="nav-${screen}"]`));
}

async function shot(d, name) {
  fs.writeFileSync(path.join(SHOTS, `${name}.png`), await d.screenshot());
}

/** The messages the console's review screen holds for its reviewer, in its list. */
function held(d) {
  return d.execute(
    "return [...document.querySelectorAll('[data-testid=review-list] li[role=option] .text')].map(e => e.textContent)",
  );
}

/** Opens the review screen afresh (leaving it gives the batch back; opening claims one). */
async function openReview(d) {
  await go(d, "history");
  await d.waitFor('[data-testid="history-count"]');
  await go(d, "review");
  return d.waitFor('[data-testid="review-remaining"]');
}

before(async () => {
  assert.ok(APP, "AEGIS_APP names the built app");
  assert.ok(DATABASE, "AEGIS_E2E_POSTGRES_URL names the team's PostgreSQL (scripts/e2e.sh starts one)");
  [rina, budi] = await Promise.all([openConsole("rina", FIRST_PORT), openConsole("budi", FIRST_PORT + 1)]);
});

after(async () => {
  for (const c of [rina, budi]) {
    if (!c) continue;
    await c.d.quit().catch(() => {});
    c.driver.kill();
    fs.rmSync(c.data, { recursive: true, force: true });
  }
});

test("a file one reviewer imports is in the other's history", async () => {
  await go(rina.d, "import");
  await rina.d.type(await rina.d.waitFor('[data-testid="import-path"]'), FIXTURE);
  await rina.d.click(await rina.d.find('[data-testid="import-open"]'));
  await rina.d.waitFor('[data-testid="import-column"]');
  await rina.d.click(await rina.d.find('[data-testid="import-run"]'));
  await rina.d.waitFor('[data-testid="import-summary"]', {
    timeout: 120_000,
    accept: async (id) => (await rina.d.attribute(id, "data-complete")) === "true",
  });
  await go(budi.d, "history");
  await budi.d.waitFor('[data-testid="history-count"]', {
    accept: async (id) => (await budi.d.attribute(id, "data-count")) === "3",
  });
});

test("two windows are never handed the same message, and one leaving the queue hands its batch to the other", async () => {
  // Rina's console claims the team's whole queue: Budi's is handed none of it.
  await openReview(rina.d);
  await rina.d.waitFor('[data-testid="review-claimed"]');
  const rinaHeld = await held(rina.d);
  assert.ok(rinaHeld.length >= 2, `the import leaves two or more to review: ${rinaHeld}`);
  await openReview(budi.d);
  await new Promise((r) => setTimeout(r, 1000));
  assert.deepEqual(await held(budi.d), [], "Budi is handed nothing Rina holds");
  await shot(budi.d, "13-team-second-window");

  // Rina agrees with the first message, then leaves the queue: the rest goes back to the team.
  const decided = await rina.d.text(await rina.d.find('[data-testid="review-current"] .message'));
  const remaining = Number(await rina.d.attribute(await rina.d.find('[data-testid="review-remaining"]'), "data-remaining"));
  await rina.d.click(await rina.d.find('[data-testid="review-list"]'));
  await rina.d.keys(["a"]);
  await rina.d.waitFor('[data-testid="review-remaining"]', {
    accept: async (id) => Number(await rina.d.attribute(id, "data-remaining")) === remaining - 1,
  });
  await go(rina.d, "history");

  await openReview(budi.d);
  await budi.d.waitFor('[data-testid="review-claimed"]', { timeout: 10_000 });
  const budiHeld = await held(budi.d);
  assert.equal(budiHeld.length, rinaHeld.length - 1, `${budiHeld} after ${rinaHeld}`);
  assert.ok(!budiHeld.includes(decided), "the message Rina decided is not handed to Budi");
  assert.ok(budiHeld.every((text) => rinaHeld.includes(text)), "Budi gets what Rina gave back");
  await budi.d.click(await budi.d.find('[data-testid="review-list"]'));
  await budi.d.keys(["o"]);
  await budi.d.waitFor('[data-testid="review-remaining"]', {
    accept: async (id) => Number(await budi.d.attribute(id, "data-remaining")) === remaining - 2,
  });

  // Each sees the other's decision, under the other's name, in the shared history.
  await go(budi.d, "history");
  await budi.d.waitFor('[data-testid="history-count"]', {
    accept: async (id) => (await budi.d.attribute(id, "data-count")) === "3",
  });
  // The row's text as the page holds it (WebDriver's visible text leaves out a clipped cell).
  const lines = await budi.d.findAll(".line");
  const texts = await budi.d.execute("return [...document.querySelectorAll('.line .text')].map(e => e.textContent)");
  const row = lines[texts.indexOf(decided)];
  assert.ok(row, `Budi's history lists the message Rina decided: ${decided} in ${texts}`);
  await budi.d.click(row);
  await budi.d.waitFor('[data-testid="history-detail"]', {
    accept: async (id) => (await budi.d.text(id)).includes("rina: agree"),
  });
  await shot(budi.d, "14-team-decision-shared");
});
