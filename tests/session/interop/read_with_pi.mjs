// Open session files with pi's own SessionManager and print what pi computes, as a JSON list.
// Usage: CLAWPI_PI_NODE_DIR=/tmp/pi-node node read_with_pi.mjs <file.jsonl>...
import { describe, loadPi } from "./pi_describe.mjs";

const pi = await loadPi();
const results = process.argv.slice(2).map((file) => describe(pi, pi.SessionManager.open(file)));
process.stdout.write(JSON.stringify(results));
