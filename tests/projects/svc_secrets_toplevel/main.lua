-- Reads a secret at the top level: refused (top-level code only declares things).
local key = secret "api-key"
