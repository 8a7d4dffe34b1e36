# cmake -DIN=FILE -DOUT=FILE.cc -DNAMESPACE=ns -DSYMBOL=kName -DHEADER=path/to/header.h -P EmbedText.cmake
# Writes a C++ source that defines `const char SYMBOL[]` in NAMESPACE holding FILE's text, so that a file kept as
# itself in the tree (the dashboard's page) ships inside the executable.
file(READ "${IN}" text)
string(FIND "${text}" ")pshard_embed\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} holds the raw-string delimiter )pshard_embed\"")
endif()
file(WRITE "${OUT}.tmp" "// Generated from ${IN} by cmake/EmbedText.cmake; edit that file instead.\n#include \"${HEADER}\"\n\nnamespace ${NAMESPACE} {\n\nextern const char ${SYMBOL}[] = R\"pshard_embed(${text})pshard_embed\";\n\n}  // namespace ${NAMESPACE}\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
