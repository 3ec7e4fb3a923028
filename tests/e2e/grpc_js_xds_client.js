// A @grpc/grpc-js-xds client: resolves the xds:/// target given as argv[2] through the bootstrap in
// GRPC_XDS_BOOTSTRAP_CONFIG and calls /echo.Echo/Call argv[3] times, printing each backend's name.
//
// Traffic modes, as grpc_xds_client.py: `--report` prints {"backends": {name: count}, "statuses":
// {code: count}} at the end, `--stream` one {"t", "backend", "status"} line per RPC (`--forever`: until
// killed); both count failures instead of stopping and do not wait for ready. `--metadata KEY=VALUE`
// (repeatable) is sent with every RPC; `--interval MS` pauses between RPCs; `--timeout S` is each RPC's
// deadline (10 s). `--xds-creds` uses xDS credentials (workload mTLS from the CDS transport socket,
// plaintext when CDS has none); `--forever` without a traffic mode keeps the channel open after the calls.
const grpc = require('@grpc/grpc-js');
const xds = require('@grpc/grpc-js-xds');

xds.register();

const positional = [];
const opts = { metadata: [], report: false, stream: false, forever: false, interval: 0, timeout: 10, xdsCreds: false };
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (a === '--report' || a === '--stream' || a === '--forever') opts[a.slice(2)] = true;
  else if (a === '--metadata') opts.metadata.push(process.argv[++i]);
  else if (a === '--interval') opts.interval = Number(process.argv[++i]);
  else if (a === '--timeout') opts.timeout = Number(process.argv[++i]);
  else if (a === '--xds-creds') opts.xdsCreds = true;
  else positional.push(a);
}
const [target, count] = [positional[0], Number(positional[1] || 4)];
const insecure = grpc.credentials.createInsecure();
const client = new grpc.Client(target, opts.xdsCreds ? new xds.XdsChannelCredentials(insecure) : insecure);
const id = (b) => b;
const metadata = new grpc.Metadata();
for (const kv of opts.metadata) {
  const at = kv.indexOf('=');
  metadata.add(kv.slice(0, at), kv.slice(at + 1));
}
const codeName = (code) => Object.keys(grpc.status).find((k) => grpc.status[k] === code) || String(code);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function call(waitForReady) {
  return new Promise((resolve, reject) => {
    const deadline = new Date(Date.now() + opts.timeout * 1000);
    client.makeUnaryRequest('/echo.Echo/Call', id, id, Buffer.from('hi'), metadata, { deadline, waitForReady },
      (err, res) => (err ? reject(err) : resolve(res.toString())));
  });
}

async function traffic() {
  const backends = {};
  const statuses = {};
  for (let i = 0; (opts.forever && opts.stream) || i < count; i++) {
    let backend = null;
    let status = 'OK';
    try {
      backend = await call(false);
    } catch (e) {
      status = codeName(e.code);
    }
    if (opts.stream) {
      console.log(JSON.stringify({ t: Date.now() / 1000, backend, status }));
    } else {
      statuses[status] = (statuses[status] || 0) + 1;
      if (backend !== null) backends[backend] = (backends[backend] || 0) + 1;
    }
    if (opts.interval) await sleep(opts.interval);
  }
  if (opts.report) console.log(JSON.stringify({ backends, statuses }));
}

async function main() {
  if (opts.report || opts.stream) return traffic();
  for (let i = 0; i < count; i++) console.log(await call(true));
  while (opts.forever) await call(true).catch(() => sleep(500));
}

main().then(() => { client.close(); process.exit(0); },
  (e) => { console.error(`ERROR ${e.code} ${e.details}`); process.exit(1); });
