// Shared by generate_with_pi.mjs and read_with_pi.mjs: load pi from $CLAWPI_PI_NODE_DIR and
// describe a session the way the clawpi tests compare it (entries, tree, leaf, context).
import { join } from "node:path";
import { pathToFileURL } from "node:url";

// pi's session manager and message conversion modules, loaded directly: the package index
// pulls in every provider SDK and takes seconds to import, these two take milliseconds.
export async function loadPi() {
  const dir = process.env.CLAWPI_PI_NODE_DIR;
  if (!dir) throw new Error("set CLAWPI_PI_NODE_DIR to a directory where @mariozechner/pi-coding-agent is installed");
  const core = join(dir, "node_modules", "@mariozechner", "pi-coding-agent", "dist", "core");
  const sessions = await import(pathToFileURL(join(core, "session-manager.js")).href);
  const messages = await import(pathToFileURL(join(core, "messages.js")).href);
  return { ...sessions, convertToLlm: messages.convertToLlm };
}

function treeOf(nodes) {
  return nodes.map((n) => ({ id: n.entry.id, label: n.label ?? null, children: treeOf(n.children) }));
}

export function describe(pi, sm) {
  const ctx = sm.buildSessionContext();
  const entries = sm.getEntries();
  const labels = {};
  for (const e of entries) {
    const label = sm.getLabel(e.id);
    if (label !== undefined) labels[e.id] = label;
  }
  return JSON.parse(
    JSON.stringify({
      header: sm.getHeader(),
      entries,
      leafId: sm.getLeafId() ?? null,
      sessionName: sm.getSessionName() ?? null,
      tree: treeOf(sm.getTree()),
      branch: sm.getBranch().map((e) => e.id),
      labels,
      context: { messages: ctx.messages, thinkingLevel: ctx.thinkingLevel, model: ctx.model },
      llmMessages: pi.convertToLlm(ctx.messages),
    }),
  );
}
