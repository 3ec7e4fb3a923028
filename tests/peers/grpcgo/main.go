// A grpc-go xDS client, the third proxyless client of the end-to-end suite beside
// tests/e2e/grpc_xds_client.py (grpcio) and tests/e2e/grpc_js_xds_client.js (@grpc/grpc-js-xds). grpc-go's
// xDS client is the one Istio's own proxyless gRPC tests use.
//
// Same command line and output as grpc_xds_client.py: resolves xds:///<target> through the bootstrap in
// GRPC_XDS_BOOTSTRAP (a file) or GRPC_XDS_BOOTSTRAP_CONFIG (its content) and calls /echo.Echo/Call
// --count times, printing each answering backend's name per line. With --xds-creds it uses xDS
// credentials (workload mTLS from the CDS transport socket, plaintext when CDS has none).
//
// Traffic modes (backends answer with their name): --report prints one JSON object at the end,
// {"backends": {name: count}, "statuses": {code: count}}; --stream prints one JSON line per RPC,
// {"t": <wall-clock seconds>, "backend": name or null, "status": code}. Both count failures instead of
// stopping, and send the RPCs without wait-for-ready. --metadata KEY=VALUE (repeatable) is sent with
// every RPC. Status codes are spelled as grpcio spells them (UNAVAILABLE, DEADLINE_EXCEEDED, ...).
//
// The messages are raw bytes (a pass-through codec), so no generated code is needed.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	xdscreds "google.golang.org/grpc/credentials/xds"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	_ "google.golang.org/grpc/xds" // registers the xds:/// resolver and the xDS balancers
)

const method = "/echo.Echo/Call"

// rawCodec sends and receives the bytes as they are. Named "proto" so the content type is the usual
// application/grpc+proto.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// grpcio's names for the status codes (grpc.StatusCode.X.name).
var codeNames = map[codes.Code]string{
	codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN",
	codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
	codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED", codes.OutOfRange: "OUT_OF_RANGE",
	codes.Unimplemented: "UNIMPLEMENTED", codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE",
	codes.DataLoss: "DATA_LOSS", codes.Unauthenticated: "UNAUTHENTICATED",
}

func codeName(c codes.Code) string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return strconv.Itoa(int(c))
}

type args struct {
	target                            string
	count                             int
	timeout, duration, interval       float64
	xdsCreds, forever, report, stream bool
	metadata                          []string
}

func usage(msg string) {
	fmt.Fprintf(os.Stderr, "usage: grpc-go-xds-client [--count N] [--timeout S] [--xds-creds] [--forever] "+
		"[--duration S] [--interval S] [--metadata KEY=VALUE] [--report | --stream] target\nerror: %s\n", msg)
	os.Exit(2)
}

// parse reads the command line as grpc_xds_client.py's argparse does: flags before or after the target,
// "--flag value" or "--flag=value".
func parse(argv []string) args {
	a := args{count: 4, timeout: 10}
	for i := 0; i < len(argv); i++ {
		arg := argv[i]
		if !strings.HasPrefix(arg, "--") {
			if a.target != "" {
				usage("unrecognized argument " + arg)
			}
			a.target = arg
			continue
		}
		name, value, hasValue := strings.Cut(arg[2:], "=")
		next := func() string {
			if hasValue {
				return value
			}
			i++
			if i >= len(argv) {
				usage("--" + name + " expects a value")
			}
			return argv[i]
		}
		number := func() float64 {
			v, err := strconv.ParseFloat(next(), 64)
			if err != nil {
				usage("--" + name + ": " + err.Error())
			}
			return v
		}
		switch name {
		case "count":
			n, err := strconv.Atoi(next())
			if err != nil {
				usage("--count: " + err.Error())
			}
			a.count = n
		case "timeout":
			a.timeout = number()
		case "duration":
			a.duration = number()
		case "interval":
			a.interval = number()
		case "metadata":
			a.metadata = append(a.metadata, next())
		case "xds-creds":
			a.xdsCreds = true
		case "forever":
			a.forever = true
		case "report":
			a.report = true
		case "stream":
			a.stream = true
		default:
			usage("unrecognized argument " + arg)
		}
	}
	if a.target == "" {
		usage("the target is required")
	}
	if a.report && a.stream {
		usage("--report and --stream are mutually exclusive")
	}
	return a
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func main() {
	a := parse(os.Args[1:])
	var creds credentials.TransportCredentials = insecure.NewCredentials()
	if a.xdsCreds {
		var err error
		creds, err = xdscreds.NewClientCredentials(xdscreds.ClientOptions{FallbackCreds: insecure.NewCredentials()})
		if err != nil {
			fmt.Fprintln(os.Stderr, "xds credentials:", err)
			os.Exit(1)
		}
	}
	conn, err := grpc.NewClient(a.target, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		fmt.Fprintln(os.Stderr, "channel:", err)
		os.Exit(1)
	}
	defer conn.Close()
	md := metadata.MD{}
	for _, kv := range a.metadata {
		k, v, _ := strings.Cut(kv, "=")
		md.Append(k, v)
	}
	call := func(waitForReady bool) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), seconds(a.timeout))
		defer cancel()
		ctx = metadata.NewOutgoingContext(ctx, md)
		req, resp := []byte("hi"), []byte(nil)
		if err := conn.Invoke(ctx, method, &req, &resp, grpc.WaitForReady(waitForReady)); err != nil {
			return "", err
		}
		return string(resp), nil
	}
	var end time.Time
	if a.duration > 0 {
		end = time.Now().Add(seconds(a.duration))
	}
	over := func() bool { return !end.IsZero() && time.Now().After(end) }
	if a.report || a.stream {
		traffic(call, a, over)
		return
	}
	for i := 0; i < a.count; i++ {
		if over() {
			break
		}
		backend, err := call(true)
		if err != nil {
			s := status.Convert(err)
			fmt.Fprintf(os.Stderr, "ERROR StatusCode.%s %s\n", codeName(s.Code()), s.Message())
			if !a.forever {
				os.Exit(1)
			}
		} else {
			fmt.Println(backend)
		}
		time.Sleep(seconds(a.interval))
	}
	for a.forever {
		if _, err := call(true); err != nil {
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// traffic is --report / --stream: every RPC counted by backend and status code.
func traffic(call func(bool) (string, error), a args, over func() bool) {
	backends, statuses := newCounter(), newCounter()
	for sent := 0; (a.forever && a.stream) || sent < a.count; sent++ {
		if over() {
			break
		}
		var backend any
		st := "OK"
		if b, err := call(false); err != nil {
			st = codeName(status.Code(err))
		} else {
			backend = b
		}
		if a.stream {
			t := float64(time.Now().UnixNano()) / 1e9
			fmt.Printf(`{"t": %s, "backend": %s, "status": %s}`+"\n",
				strconv.FormatFloat(t, 'f', -1, 64), jsonText(backend), jsonText(st))
		} else {
			statuses.add(st)
			if backend != nil {
				backends.add(backend.(string))
			}
		}
		time.Sleep(seconds(a.interval))
	}
	if a.report {
		fmt.Printf(`{"backends": %s, "statuses": %s}`+"\n", backends, statuses)
	}
}

// counter is a Counter that keeps the order keys were first seen in, as Python's dict does.
type counter struct {
	keys   []string
	counts map[string]int
}

func newCounter() *counter { return &counter{counts: map[string]int{}} }

func (c *counter) add(k string) {
	if _, ok := c.counts[k]; !ok {
		c.keys = append(c.keys, k)
	}
	c.counts[k]++
}

// String is the counter as json.dumps writes a dict: {"a": 1, "b": 2}.
func (c *counter) String() string {
	parts := make([]string, len(c.keys))
	for i, k := range c.keys {
		parts[i] = fmt.Sprintf("%s: %d", jsonText(k), c.counts[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
