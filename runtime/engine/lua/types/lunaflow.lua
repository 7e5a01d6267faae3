---@meta lunaflow
-- Editor types for lunaflow scripts (lua-language-server). `lunaflow new` installs this file
-- and a .luarc.json that points at it, so an editor completes `wf:step(` and flags `wf:awiat`.

---A JSON-like value: nil, boolean, number (integers stay integers), string, or a table whose
---keys are all strings or form a 1..n array.
---@alias lunaflow.Value nil|boolean|number|string|table

---A duration: "100ms", "30s", "1h30m", "7d", or a number of seconds.
---@alias lunaflow.Duration string|number

---@alias lunaflow.Status "running"|"sleeping"|"awaiting"|"failed"|"completed"|"cancelled"

---@class lunaflow.StepOptions
---@field retries? integer total attempts, not attempts after the first; 0 is read as 1 (default 1)
---@field backoff? lunaflow.Duration wait before attempt 2, doubling after that (default "2s")
---@field max_backoff? lunaflow.Duration the longest wait between attempts (default: no cap)
---@field jitter? number|boolean a share of each wait, 0 to 1, drawn away at random (default 0; true is 1)
---@field timeout? lunaflow.Duration how long one attempt may run (default: none)
---@field catch? boolean raise the final failure into the workflow, for pcall (default false)

---@class lunaflow.WaitOptions
---@field timeout? lunaflow.Duration
---@field within? lunaflow.Duration wf:all only: the bound of the whole wait, from its first entry

---@class lunaflow.CancelOptions
---@field timeout? lunaflow.Duration the cleanup's time budget, from the cancel (default "1h")

---The handle a workflow function gets.
---@class lunaflow.Wf
---@field id string the run id
---@field workflow string the workflow's name
---@field step_id string inside a step body only: "<run id>/<step name>/<pass>/<attempt>"
local Wf = {}

---Run `fn` once and record what it returned; on replay the recorded values come back.
---@param name string stable across revisions: replay matches by name
---@param opts_or_fn lunaflow.StepOptions|fun(): ...
---@param fn? fun(): ...
---@return ...
function Wf:step(name, opts_or_fn, fn) end

---Pause the run for a duration (the run is `sleeping`: journal rows and a timer).
---@param duration lunaflow.Duration
function Wf:sleep(duration) end

---Wait for a signal; returns its payload, or nil on timeout.
---@param name string
---@param opts? lunaflow.WaitOptions
---@return lunaflow.Value
function Wf:await(name, opts) end

---Wait for the first of several signals; returns its payload and name (nil, nil on timeout).
---Only the winner is consumed.
---@param names string[]
---@param opts? lunaflow.WaitOptions
---@return lunaflow.Value payload
---@return string? name
function Wf:race(names, opts) end

---Wait for each signal in order, each with the full timeout (and all of them within
---`within`, if given); returns the payloads in argument order (a timed-out entry is nil).
---@param names string[]
---@param opts? lunaflow.WaitOptions
---@return ...
function Wf:all(names, opts) end

---What the run does when it is cancelled: a cancel then runs `fn` (its steps durable) in
---place of the workflow function, within its budget, and the run ends cancelled after it.
---Once per run, in the workflow function.
---@param opts_or_fn lunaflow.CancelOptions|fun()
---@param fn? fun()
function Wf:on_cancel(opts_or_fn, fn) end

---True for runs started by code that names this change, false for runs started before it
---was deployed. Pass a literal string.
---@param change string
---@return boolean
function Wf:version(change) end

---@class lunaflow.ChildOptions
---@field id? string the child's run id (default: "<run id>.child-<n>" for the n-th; "<run id>@<g>.child-<n>" in generation g > 1)
---@field timeout? lunaflow.Duration the child run's own bound, as handle:start takes it

---Start a run of `workflow` as this run's child (journaled once, no step needed), or join
---the run that has the id.
---@param workflow string|lunaflow.Workflow
---@param input lunaflow.Value
---@param opts? lunaflow.ChildOptions
---@return lunaflow.Child
function Wf:child(workflow, input, opts) end

---@class lunaflow.MapOptions
---@field limit? integer how many branches run at once (1 to 1000; default all)
---@field timeout? lunaflow.Duration each branch run's own bound
---@field id? fun(item: lunaflow.Value, i: integer): string each branch's run id

---Run `workflow` once per item, as child runs at once (at most `limit`), and return their
---results in the order of `items`. A failed branch raises, once every branch has settled, a
---table with `failed` (each failed branch) and `results` (the others').
---@param items lunaflow.Value[]
---@param workflow string|lunaflow.Workflow
---@param opts? lunaflow.MapOptions
---@return lunaflow.Value[]
function Wf:map(items, workflow, opts) end

---Wait for child runs already started (handles keyed by name or position) and return their
---results under the same keys; a failed branch raises once every branch has settled.
---@param branches table<string|integer, lunaflow.Child>
---@param opts? lunaflow.WaitOptions
---@return table<string|integer, lunaflow.Value>
function Wf:all_of(branches, opts) end

---A child run started by wf:child.
---@class lunaflow.Child
---@field id string
---@field workflow string
local Child = {}

---Park until the child ends; its result, or an error (a table with child, workflow, status
---and message) when it failed, was cancelled or the timeout passed.
---@param opts? lunaflow.WaitOptions
---@return lunaflow.Value
function Child:result(opts) end

---A run of a workflow.
---@class lunaflow.Run
---@field id string
---@field workflow string
local Run = {}

---@return lunaflow.Status
function Run:status() end

---The function's return value once completed, else nil.
---@return lunaflow.Value
function Run:result() end

---Send a signal: true if a live run got it, false if the run has ended (set aside).
---@param name string
---@param payload? lunaflow.Value
---@return boolean
function Run:signal(name, payload) end

---Cancel the run and, recursively, the runs it started.
function Run:cancel() end

---Resume a failed run; its failed step gets a fresh set of attempts.
function Run:resume() end

---@class lunaflow.StartOptions
---@field id? string the run id (a non-empty string without "/", at most 200 bytes)
---@field timeout? lunaflow.Duration past it the run ends failed, "run 'id' timed out after ..."
---@field signal? string signal-with-start: this signal is written with the run in one write (or sent to the run of that id)
---@field payload? lunaflow.Value the signal's payload

---A workflow's handle.
---@class lunaflow.Workflow
---@field name string
local Workflow = {}

---Start a run, or join the run that already has this id; with `signal`, deliver it too.
---@param input? lunaflow.Value
---@param opts? lunaflow.StartOptions
---@return lunaflow.Run
function Workflow:start(input, opts) end

---The handle of a run by id.
---@param id string
---@return lunaflow.Run
function Workflow:get(id) end

---Declare a workflow (at a script's top level).
---@param name string
---@return fun(fn: fun(wf: lunaflow.Wf, input: any): any): lunaflow.Workflow
function workflow(name) end

---The handle of a workflow declared in any script of the project.
---@param name string
---@return lunaflow.Workflow
function workflows(name) end

---@class lunaflow.ExecResult
---@field changes integer rows changed (ids come back with RETURNING through :first)

---@class lunaflow.Database
local Database = {}
---@param sql string with ? (or :name) placeholders
---@param params? any[]|table<string, any>
---@return lunaflow.ExecResult
function Database:exec(sql, params) end
---@param sql string
---@param params? any[]|table<string, any>
---@return table[]
function Database:query(sql, params) end
---@param sql string
---@param params? any[]|table<string, any>
---@return table?
function Database:first(sql, params) end

---@class lunaflow.DatabaseOptions
---@field migrations? string a folder of NNN_name.sql files

---Declare a SQL database.
---@param name string
---@return fun(opts: lunaflow.DatabaseOptions): lunaflow.Database
function database(name) end

---Declare an object class: methods get `self` with `self.key` and `self.state`.
---@param name string
---@return fun(methods: table<string, function>)
function object(name) end

---A class handle: `Name(key)` is a stub whose methods call the object.
---@param name string
---@return fun(key: string): table
function objects(name) end

---@class lunaflow.KvPutOptions
---@field ttl? lunaflow.Duration

---@class lunaflow.KvListOptions
---@field prefix? string
---@field limit? integer

---@class lunaflow.Kv
local Kv = {}
---@param key string
---@return lunaflow.Value
function Kv:get(key) end
---@param key string
---@param value lunaflow.Value
---@param opts? lunaflow.KvPutOptions
function Kv:put(key, value, opts) end
---@param key string
---@return boolean existed
function Kv:delete(key) end
---@param opts? lunaflow.KvListOptions
---@return { key: string, value: lunaflow.Value }[]
function Kv:list(opts) end

---A key-value namespace.
---@param namespace string
---@return lunaflow.Kv
function kv(namespace) end

---The secret's current value; in run code, the version the run first resolved.
---@param name string
---@return string
function secret(name) end

---@class lunaflow.SendOptions
---@field delay? lunaflow.Duration at most 15m

---@class lunaflow.Queue
local Queue = {}
---@param body lunaflow.Value
---@param opts? lunaflow.SendOptions
---@return string message id
function Queue:send(body, opts) end

---A queue.
---@param name string
---@return lunaflow.Queue
function queue(name) end

---@class lunaflow.Request
---@field method string
---@field path string
---@field query table<string, string>
---@field headers table<string, string> lower-case names
---@field body string

---@class lunaflow.Response
---@field status_code integer
---@field headers? table<string, string>
---@field body? string

---@class lunaflow.QueueMessage
---@field id string
---@field body lunaflow.Value
---@field attempts integer

---Declare the project's HTTP handler (`on "fetch" (fn)`) or a queue handler
---(`on "queue" ("name", fn)`).
---@param event "fetch"|"queue"
---@return fun(fn_or_name: (fun(request: lunaflow.Request): lunaflow.Response)|string, fn?: fun(message: lunaflow.QueueMessage))
function on(event) end

---@class lunaflow.Json
json = {}
---@param s string
---@return lunaflow.Value
function json.parse(s) end
---@param v lunaflow.Value
---@return string
function json.encode(v) end

---@class lunaflow.Uuid
uuid = {}
---@return string
function uuid.v4() end

---@class lunaflow.HttpRequest
---@field method? string
---@field url string
---@field headers? table<string, string>
---@field body? string
---@field timeout? lunaflow.Duration

---@class lunaflow.HttpResponse
---@field status integer
---@field headers table<string, string>
---@field body string

---Outbound HTTP (handlers and objects; absent in run code).
---@class lunaflow.Http
http = {}
---@param req lunaflow.HttpRequest
---@return lunaflow.HttpResponse
function http.request(req) end
---@param url string
---@param opts? table
---@return lunaflow.HttpResponse
function http.get(url, opts) end
---@param url string
---@param body string
---@param opts? table
---@return lunaflow.HttpResponse
function http.post(url, body, opts) end

---Hashing and randomness (handlers and objects; absent in run code).
---@class lunaflow.Crypto
crypto = {}
---@param s string
---@return string raw digest
function crypto.sha256(s) end
---@param key string
---@param s string
---@return string raw digest
function crypto.hmac_sha256(key, s) end
---@param n integer
---@return string raw bytes
function crypto.random_bytes(n) end
---@param s string
---@return string
function crypto.hex(s) end
---@param s string
---@return string
function crypto.base64_encode(s) end
---@param s string
---@return string
function crypto.base64_decode(s) end

---JSON Web Tokens (handlers and objects; absent in run code).
---@class lunaflow.Jwt
Jwt = {}
---@param claims table
---@param key string
---@param opts? { alg?: "HS256"|"HS384"|"HS512" }
---@return string token
function Jwt.sign(claims, key, opts) end
---@param token string
---@param key string
---@return table? claims
---@return string? error
function Jwt.verify(token, key) end

---Structured logs.
---@class lunaflow.Log
log = {}
---@param msg string
---@param fields? table
function log.info(msg, fields) end
---@param msg string
---@param fields? table
function log.warn(msg, fields) end
---@param msg string
---@param fields? table
function log.error(msg, fields) end

-- In lunaflow tests (tests/*_test.lua, run by `lunaflow test`):

---@class lunaflow.TestPlatform
local TestPlatform = {}
---@return { id: string, status: lunaflow.Status, result: any, error: string? }
function TestPlatform:start(workflow, input, opts) end
---@return boolean
function TestPlatform:signal(run_id, name, payload) end
---@return { status_code: integer, headers: table, body: string }
function TestPlatform:fetch(method, path, opts) end
---@param duration lunaflow.Duration
function TestPlatform:advance(duration) end
function TestPlatform:settle() end
---@return { id: string, workflow: string, status: lunaflow.Status, current_step: string?, result: any, error: string?, parent_id: string? }
function TestPlatform:get(run_id) end
---@return { seq: integer, kind: string, name: string?, data: table }[]
function TestPlatform:journal(run_id) end
function TestPlatform:runs(opts) end
function TestPlatform:cancel(run_id) end
function TestPlatform:resume(run_id) end
---A run waiting out a step's backoff runs the next attempt now.
function TestPlatform:retry(run_id) end
---@param class string
---@param method string
---@param fn fun(key: string, ...): ...
function TestPlatform:stub_object(class, method, fn) end
---@param fn fun(request: table): { status: integer, headers?: table, body?: string }
function TestPlatform:stub_http(fn) end

---Declare a test.
---@param name string
---@param fn fun(p: lunaflow.TestPlatform)
function test(name, fn) end
---@param actual any
---@param expected any
---@param message? string
function assert_eq(actual, expected, message) end
---@param value any
---@param message? string
function assert_true(value, message) end
