-- escape: return ten million values from a step body at once.
-- where: step
-- expect: error too many results to unpack
return table.unpack({}, 1, 1e7)
