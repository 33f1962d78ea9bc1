// Preloaded into every Node process of the `cdk synth` test (NODE_OPTIONS=--require ...): records each
// DNS lookup and each TCP/UDP connection attempt to $NETHOOK_LOG, one JSON line each, then lets it go on.
"use strict";
const fs = require("fs");
const net = require("net");
const dns = require("dns");
const dgram = require("dgram");

const log = process.env.NETHOOK_LOG;
function record(kind, target) {
  if (log) fs.appendFileSync(log, JSON.stringify({ pid: process.pid, kind, target: String(target) }) + "\n");
}

const connect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function (...args) {
  if (Array.isArray(args[0])) args = args[0];  // Node's internal calls pass [options, callback]
  const options = typeof args[0] === "object" && args[0] !== null && !Array.isArray(args[0]) ? args[0] : null;
  const path = options ? options.path : typeof args[0] === "string" && isNaN(Number(args[0])) ? args[0] : undefined;
  if (path === undefined) {  // local IPC (unix sockets, pipes) is not network
    const host = options ? options.host : args[1];
    const port = options ? options.port : args[0];
    record("connect", `${host || "localhost"}:${port}`);
  }
  return connect.apply(this, arguments);
};
for (const mod of [dns, dns.promises]) {
  for (const fn of ["lookup", "resolve", "resolve4", "resolve6"]) {
    const original = mod[fn];
    if (typeof original === "function") {
      mod[fn] = function (host, ...rest) {
        record(`dns.${fn}`, host);
        return original.call(this, host, ...rest);
      };
    }
  }
}
const send = dgram.Socket.prototype.send;
dgram.Socket.prototype.send = function (...args) {
  record("udp", args.slice(1).filter((a) => typeof a !== "function").join(":"));
  return send.apply(this, args);
};
