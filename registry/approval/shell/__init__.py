"""The shell model used by detection: normalisation, lexing, parsing, expansion.

Nothing here executes anything. :mod:`.normalize` undoes text-level
obfuscation, :mod:`.lexer`/:mod:`.parse` turn a string into pipelines of
simple commands, :mod:`.expand` performs the expansions bash would perform
when their inputs are statically known, :mod:`.resolve` strips wrappers
(``sudo``, ``env``, ``timeout``...) to find the program that really runs, and
:mod:`.nested`/:mod:`.dataflow` find the code a command hands to another
interpreter.
"""
