-- Declares the class a.lua already declared: the project is refused.
object "Counter" { get = function(self) return 2 end }
