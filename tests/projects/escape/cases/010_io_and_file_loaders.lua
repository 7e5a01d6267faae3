-- escape: open files from a queue handler: the io library, dofile, loadfile, and require "io".
-- where: queue
-- expect: result ["nil", "nil", "nil", "nil", "refused"]
return {
    type(io),
    type(io and io.open),
    type(dofile),
    type(loadfile),
    pcall(require, "io") and "loaded" or "refused",
}
