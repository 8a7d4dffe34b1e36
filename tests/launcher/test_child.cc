// A tiny child process for the LocalJob tests: prints, sleeps, exits or ignores SIGTERM on request.
//   test_child print       -> two stdout lines, one stderr line, an unterminated last line; exit 0
//   test_child exit CODE MS -> sleeps MS milliseconds, exits with CODE
//   test_child sleep MS    -> sleeps MS milliseconds, exits 0
//   test_child stubborn MS -> ignores SIGTERM, sleeps MS milliseconds
//   test_child env NAME    -> prints the value of environment variable NAME
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::string mode = argv[1];
  auto ms = [&](int i) { return argc > i ? std::atoi(argv[i]) : 0; };
  if (mode == "print") {
    std::printf("hello %d\n", static_cast<int>(getpid()));
    std::printf("second line\n");
    std::printf("[printer] already prefixed\n");
    std::fflush(stdout);
    std::fprintf(stderr, "to stderr\n");
    std::printf("no newline at the end");
    return 0;
  }
  if (mode == "fail") {  // fail STATUS MESSAGE: an error line as pshard prints one, then exit STATUS
    std::fprintf(stderr, "[worker] info: working\n");
    std::fprintf(stderr, "pshard worker: error: %s\n", argv[3]);
    std::fprintf(stderr, "[worker] error: a later consequence\n");
    return std::atoi(argv[2]);
  }
  if (mode == "exit") {
    usleep(static_cast<useconds_t>(ms(3)) * 1000);
    return std::atoi(argv[2]);
  }
  if (mode == "sleep" || mode == "stubborn") {
    if (mode == "stubborn") std::signal(SIGTERM, SIG_IGN);
    std::printf("sleeping\n");
    std::fflush(stdout);
    int left = ms(2);
    while (left > 0) {
      usleep(10000);
      left -= 10;
    }
    return 0;
  }
  if (mode == "env") {
    const char* v = std::getenv(argv[2]);
    std::printf("%s=%s\n", argv[2], v ? v : "(unset)");
    return 0;
  }
  return 2;
}
