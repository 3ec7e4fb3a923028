// A @grpc/grpc-js-xds client: resolves the xds:/// target given as argv[2] through the bootstrap in
// GRPC_XDS_BOOTSTRAP_CONFIG and calls /echo.Echo/Call argv[3] times, printing each backend's name.
const grpc = require('@grpc/grpc-js');
require('@grpc/grpc-js-xds').register();

const [target, count] = [process.argv[2], Number(process.argv[3] || 4)];
const client = new grpc.Client(target, grpc.credentials.createInsecure());
const id = (b) => b;

async function main() {
  for (let i = 0; i < count; i++) {
    const reply = await new Promise((resolve, reject) => {
      const deadline = new Date(Date.now() + 10000);
      client.makeUnaryRequest('/echo.Echo/Call', id, id, Buffer.from('hi'), { deadline, waitForReady: true },
        (err, res) => (err ? reject(err) : resolve(res)));
    });
    console.log(reply.toString());
  }
  client.close();
}

main().then(() => process.exit(0), (e) => { console.error(`ERROR ${e.code} ${e.details}`); process.exit(1); });
