-- escape: a module (this very file, reached as cases.059_require_itself) that requires
-- itself while loading, for unbounded recursion through require.
-- where: step
-- expect: error a module cannot require itself while loading
return require "cases.059_require_itself"
