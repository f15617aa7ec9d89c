// Open a session file with pi's own SessionManager and print what pi computes, as JSON.
// Usage: CLAWPI_PI_NODE_DIR=/tmp/pi-node node read_with_pi.mjs <file.jsonl>
import { describe, loadPi } from "./pi_describe.mjs";

const pi = await loadPi();
const sm = pi.SessionManager.open(process.argv[2]);
process.stdout.write(JSON.stringify(describe(pi, sm)));
