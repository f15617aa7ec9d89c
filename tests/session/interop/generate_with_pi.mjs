// Writes real session files with pi-coding-agent itself, plus what pi computes from them, into
// tests/session/data/. Re-run (see tests/session/interop/README.md):
//   CLAWPI_PI_NODE_DIR=/tmp/pi-node node tests/session/interop/generate_with_pi.mjs
// Every scenario: <name>.jsonl (the file pi wrote) and <name>.pi.json (pi's view after
// SessionManager.open: header, entries, tree, leaf, labels, context, convertToLlm messages).
// Legacy scenarios also keep the input: <name>.input.jsonl (v1/v2), migrated by pi on open.
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, loadPi } from "./pi_describe.mjs";

const pi = await loadPi();
const { SessionManager } = pi;
const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "data");
mkdirSync(out, { recursive: true });
const scratch = mkdtempSync(join(tmpdir(), "clawpi-pi-gen-"));
const CWD = "/work/project";
let clock = 1_795_300_000_000;
const tick = () => (clock += 1000);

const usage = (i, o) => ({
  input: i, output: o, cacheRead: 0, cacheWrite: 0, totalTokens: i + o,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
});
const user = (text) => ({ role: "user", content: text, timestamp: tick() });
const asst = (content, stopReason = "stop", model = "claude-sonnet-4-5", provider = "anthropic") => ({
  role: "assistant", content, api: "anthropic-messages", provider, model,
  usage: usage(100, 10), stopReason, timestamp: tick(),
});
const text = (t) => ({ type: "text", text: t });
const call = (id, name, args) => ({ type: "toolCall", id, name, arguments: args });
const result = (id, name, t, isError = false) => ({
  role: "toolResult", toolCallId: id, toolName: name, content: [text(t)], isError, timestamp: tick(),
});

function save(name, sm) {
  const file = sm.getSessionFile();
  copyFileSync(file, join(out, `${name}.jsonl`));
  const reopened = SessionManager.open(file);
  writeFileSync(join(out, `${name}.pi.json`), `${JSON.stringify(describe(pi, reopened), null, 1)}\n`);
}

function newManager(name) {
  return SessionManager.create(CWD, join(scratch, name));
}

// 1. A tool call, a branch from the second assistant, then a compaction on the new branch.
{
  const sm = newManager("basic");
  sm.appendModelChange("anthropic", "claude-sonnet-4-5");
  sm.appendThinkingLevelChange("off");
  sm.appendMessage(user("List the files"));
  sm.appendMessage(asst([{ type: "thinking", thinking: "Use ls.", thinkingSignature: "sig" },
    call("toolu_01", "bash", { command: "ls" })], "toolUse"));
  sm.appendMessage(result("toolu_01", "bash", "a.txt\nb.txt"));
  const a2 = sm.appendMessage(asst([text("Two files.")]));
  sm.appendMessage(user("Delete them"));
  sm.appendMessage(asst([text("Deleted.")]));
  sm.branch(a2);
  const u = sm.appendMessage(user("Show sizes instead"));
  sm.appendMessage(asst([text("10 and 20 bytes.")]));
  sm.appendCompaction("## Goal\nInspect files.", u, 206, { readFiles: [], modifiedFiles: [] });
  sm.appendMessage(user("Thanks"));
  sm.appendMessage(asst([text("You're welcome.")]));
  save("basic", sm);
}

// 2. Labels, session names, custom entries, custom messages, bash executions, branch summaries.
{
  const sm = newManager("features");
  sm.appendThinkingLevelChange("high");
  const u1 = sm.appendMessage(user("Start"));
  const a1 = sm.appendMessage(asst([text("Started.")], "stop", "gpt-5", "openai"));
  sm.appendLabelChange(u1, "start");
  sm.appendSessionInfo("  demo session  ");
  sm.appendCustomEntry("my-ext", { count: 1 });
  sm.appendCustomEntry("my-ext-nodata");
  sm.appendCustomMessageEntry("my-ext", "Injected context", true, { note: "not sent" });
  sm.appendCustomMessageEntry("my-ext", [text("Array content")], false);
  sm.appendMessage({ role: "bashExecution", command: "ls", output: "x\n", exitCode: 0,
    cancelled: false, truncated: false, timestamp: tick() });
  sm.appendMessage({ role: "bashExecution", command: "false", output: "", exitCode: 1,
    cancelled: false, truncated: true, fullOutputPath: "/tmp/out.txt", timestamp: tick() });
  sm.appendMessage({ role: "bashExecution", command: "secret", output: "s", exitCode: 0,
    cancelled: false, truncated: false, timestamp: tick(), excludeFromContext: true });
  sm.appendMessage({ role: "custom", customType: "note", content: "A custom message", display: true,
    timestamp: tick() });
  const a2 = sm.appendMessage(asst([text("Abandoned path")]));
  sm.appendLabelChange(a2, "old");
  sm.appendLabelChange(a2, undefined);
  sm.appendLabelChange(a1, "answer");
  sm.branchWithSummary(a1, "Summary of the abandoned branch", { readFiles: ["a"], modifiedFiles: [] }, false);
  sm.appendMessage(user("Continue"));
  sm.appendMessage(asst([text("Continuing.")]));
  sm.appendSessionInfo("renamed");
  sm.appendModelChange("openai", "gpt-5-mini");
  save("features", sm);
}

// 3. Two compactions (only the latest counts), one whose firstKeptEntryId is not on the path.
{
  const sm = newManager("compactions");
  const u1 = sm.appendMessage(user("one"));
  sm.appendMessage(asst([text("1")]));
  const u2 = sm.appendMessage(user("two"));
  sm.appendMessage(asst([text("2")]));
  sm.appendCompaction("first summary", u2, 50);
  sm.appendMessage(user("three"));
  sm.appendMessage(asst([text("3")]));
  sm.appendCompaction("second summary", u1, 80, undefined, true);
  sm.appendMessage(user("four"));
  sm.appendMessage(asst([text("4")]));
  save("compactions", sm);

  const sm2 = newManager("compaction_missing_kept");
  sm2.appendMessage(user("one"));
  sm2.appendMessage(asst([text("1")]));
  sm2.appendCompaction("summary", "deadbeef", 10);
  sm2.appendMessage(user("after"));
  sm2.appendMessage(asst([text("ok")]));
  save("compaction_missing_kept", sm2);
}

// 4. resetLeaf and a summary from before the root: several roots in one file.
{
  const sm = newManager("roots");
  sm.appendMessage(user("first try"));
  sm.appendMessage(asst([text("meh")]));
  sm.resetLeaf();
  sm.appendMessage(user("second try"));
  const a = sm.appendMessage(asst([text("better")]));
  sm.branchWithSummary(null, "Tried twice");
  sm.appendMessage(user("third"));
  sm.appendMessage(asst([text("best")], "error"));
  sm.branch(a);
  save("roots", sm);
  // navigation alone is not persisted: re-opening puts the leaf on the last line
}

// 5. createBranchedSession (labels re-created) and forkFrom.
{
  const sm = newManager("branched_source");
  const u1 = sm.appendMessage(user("hello"));
  const a1 = sm.appendMessage(asst([text("hi")]));
  sm.appendLabelChange(u1, "greeting");
  sm.appendMessage(user("more"));
  sm.appendMessage(asst([text("more!")]));
  save("branched_source", sm);
  sm.createBranchedSession(a1);
  sm.appendMessage(user("new branch"));
  sm.appendMessage(asst([text("ok")]));
  save("branched", sm);
  const forked = SessionManager.forkFrom(sm.getSessionFile(), "/work/other", join(scratch, "forked"));
  forked.appendMessage(user("in fork"));
  forked.appendMessage(asst([text("forked")]));
  save("forked", forked);
}

// 6. Unknown entry types and unknown fields, written as a newer pi or an extension might.
{
  const dir = join(scratch, "unknown");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, "unknown.jsonl");
  const lines = [
    { type: "session", version: 3, id: "11111111-2222-3333-4444-555555555555", timestamp: "2026-01-01T00:00:00.000Z", cwd: CWD, futureHeaderField: { a: 1 } },
    { type: "message", id: "aaaa0001", parentId: null, timestamp: "2026-01-01T00:00:01.000Z", message: { role: "user", content: "hi", timestamp: 1, novel: [1, 2] }, extra: "kept" },
    { type: "future_entry", id: "aaaa0002", parentId: "aaaa0001", timestamp: "2026-01-01T00:00:02.000Z", payload: { deep: { x: null } } },
    { type: "message", id: "aaaa0003", parentId: "aaaa0002", timestamp: "2026-01-01T00:00:03.000Z", message: { role: "assistant", content: [text("yo"), { type: "futureBlock", data: 1 }], api: "x", provider: "p", model: "m", usage: usage(1, 1), stopReason: "stop", timestamp: 3 } },
    { type: "message", id: "aaaa0004", parentId: "aaaa0003", timestamp: "2026-01-01T00:00:04.000Z", message: { role: "futureRole", content: "?", timestamp: 4 } },
    { type: "message", id: "aaaa0005", parentId: "aaaa0004", timestamp: "2026-01-01T00:00:05.000Z", message: { role: "user", content: [text("ünïcödé ✓ 😀"), { type: "image", data: "aGVsbG8=", mimeType: "image/png" }], timestamp: 5 } },
  ];
  writeFileSync(file, `${lines.map((l) => JSON.stringify(l)).join("\n")}\n`);
  const sm = SessionManager.open(file);
  sm.appendMessage(asst([text("appended by pi")]));
  save("unknown", sm);
}

// 7. v1 and v2 files: pi migrates them in place on open.
{
  const dir = join(scratch, "legacy");
  mkdirSync(dir, { recursive: true });
  const v1 = [
    { type: "session", id: "legacy-1", timestamp: "2025-01-01T00:00:00.000Z", cwd: "/x", provider: "anthropic", modelId: "m", thinkingLevel: "off" },
    { type: "message", timestamp: "2025-01-01T00:00:01.000Z", message: { role: "user", content: "hi", timestamp: 1 } },
    { type: "message", timestamp: "2025-01-01T00:00:02.000Z", message: { role: "hookMessage", customType: "x", content: "h", display: true, timestamp: 2 } },
    { type: "message", timestamp: "2025-01-01T00:00:02.500Z", message: { role: "assistant", content: [text("a")], api: "x", provider: "anthropic", model: "m", usage: usage(1, 1), stopReason: "stop", timestamp: 3 } },
    { type: "compaction", timestamp: "2025-01-01T00:00:03.000Z", summary: "s", tokensBefore: 5, firstKeptEntryIndex: 2 },
    { type: "thinking_level_change", timestamp: "2025-01-01T00:00:04.000Z", thinkingLevel: "low" },
    { type: "message", timestamp: "2025-01-01T00:00:05.000Z", message: { role: "user", content: "after", timestamp: 5 } },
  ];
  const v2 = [
    { type: "session", version: 2, id: "legacy-2", timestamp: "2025-02-01T00:00:00.000Z", cwd: "/y" },
    { type: "message", id: "b0000001", parentId: null, timestamp: "2025-02-01T00:00:01.000Z", message: { role: "user", content: "hi", timestamp: 1 } },
    { type: "message", id: "b0000002", parentId: "b0000001", timestamp: "2025-02-01T00:00:02.000Z", message: { role: "hookMessage", customType: "y", content: [text("hook")], display: false, timestamp: 2 } },
    { type: "message", id: "b0000003", parentId: "b0000002", timestamp: "2025-02-01T00:00:03.000Z", message: { role: "assistant", content: [text("b")], api: "x", provider: "openai", model: "gpt", usage: usage(1, 1), stopReason: "stop", timestamp: 3 } },
  ];
  for (const [name, lines] of [["v1", v1], ["v2", v2]]) {
    const content = `${lines.map((l) => JSON.stringify(l)).join("\n")}\n`;
    writeFileSync(join(out, `${name}.input.jsonl`), content);
    const file = join(dir, `${name}.jsonl`);
    writeFileSync(file, content);
    save(name, SessionManager.open(file));
  }
}

rmSync(scratch, { recursive: true, force: true });
console.log(readdirSync(out).sort().join("\n"));
