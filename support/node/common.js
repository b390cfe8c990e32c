'use strict'
// What the two foreign services share: options (flags, else environment), their files, the clock of the
// output lines, the pidfile and one clean-shutdown path. Nothing here knows about kstate: these services
// are stand-ins for services no one here wrote (issue 25), driven only from outside (signals, commands).

const fs = require('fs')
const path = require('path')
const { performance } = require('perf_hooks')

// --name NAME --run-dir DIR --brokers a:1,b:2 ... ; every flag also reads KSTATE_FLEET_<FLAG> (upper, _).
function options(defaults) {
  const out = { ...defaults }
  for (const key of Object.keys(defaults)) {
    const env = process.env[`KSTATE_FLEET_${key.replace(/-/g, '_').toUpperCase()}`]
    if (env !== undefined) out[key] = env
  }
  const argv = process.argv.slice(2)
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]
    if (!flag.startsWith('--')) throw new Error(`unexpected argument ${flag}`)
    const eq = flag.indexOf('=')
    const key = eq > 0 ? flag.slice(2, eq) : flag.slice(2)
    if (!(key in defaults)) throw new Error(`unknown option --${key}`)
    out[key] = eq > 0 ? flag.slice(eq + 1) : argv[++i]
    if (out[key] === undefined) throw new Error(`--${key} needs a value`)
  }
  for (const [key, value] of Object.entries(out)) {
    if (value === null) throw new Error(`--${key} is required`)
    if (typeof defaults[key] === 'number') out[key] = Number(value)
  }
  return out
}

// The files of service NAME in the run directory (the same names fleet.py and svc.sh use).
function files(runDir, name) {
  const at = suffix => path.join(runDir, `${name}.${suffix}`)
  return {
    pid: at('pid'),
    ready: at('ready'),
    out: at('jsonl'),
    events: at('events.jsonl'),
  }
}

// Wall-clock milliseconds with microsecond resolution: comparable across the processes of one host, fine
// enough to order two members' processing of records of one key.
const now = () => Math.round((performance.timeOrigin + performance.now()) * 1000) / 1000

// An append-only JSON-lines file written with one write(2) per line: a line is in the file (the page cache)
// when the call returns, so even a SIGKILL loses no processed record, and a reader never sees half a line.
function lines(file) {
  const fd = fs.openSync(file, 'a')
  return {
    write: obj => fs.writeSync(fd, JSON.stringify(obj) + '\n'),
    close: () => fs.closeSync(fd),
  }
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

// SIGTERM/SIGINT run `stop` once (bounded by `graceMs`), then the pidfile and ready marker go and the
// process exits 0; a stop that fails or hangs exits 1, so a supervisor sees it.
function lifecycle(f, events, stop, graceMs) {
  fs.mkdirSync(path.dirname(f.pid), { recursive: true })
  fs.writeFileSync(f.pid, `${process.pid}\n`)
  events.write({ ev: 'start', t: now(), pid: process.pid })
  let stopping = false
  const finish = code => {
    events.write({ ev: 'exit', t: now(), code })
    for (const file of [f.ready, f.pid]) fs.rmSync(file, { force: true })
    process.exit(code)
  }
  const onSignal = signal => {
    if (stopping) return
    stopping = true
    fs.rmSync(f.ready, { force: true })
    events.write({ ev: 'stop', t: now(), signal })
    const timer = setTimeout(() => {
      console.error(`stop did not finish within ${graceMs} ms`)
      finish(1)
    }, graceMs)
    stop().then(
      () => {
        clearTimeout(timer)
        finish(0)
      },
      err => {
        console.error(`stop failed: ${err && err.stack}`)
        finish(1)
      }
    )
  }
  process.on('SIGTERM', onSignal)
  process.on('SIGINT', onSignal)
  return { stopping: () => stopping, finish }
}

module.exports = { options, files, now, lines, sleep, lifecycle }
