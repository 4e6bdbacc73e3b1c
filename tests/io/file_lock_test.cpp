// io::FileLock: one writer per resumable output.
#include <doctest/doctest.h>

#include <bosch/error.hpp>
#include <bosch/io/file_lock.hpp>

#include <filesystem>
#include <string>
#include <unistd.h>

namespace fs = std::filesystem;

TEST_CASE("FileLock: a second holder is refused with the lock file named; released locks can be taken again") {
  const fs::path dir = fs::temp_directory_path() / ("bosch_test_lock_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path path = dir / "out.checkpoint.lock";
  {
    bosch::io::FileLock first(path, "checkpoint 'out.checkpoint'");
    CHECK(fs::exists(path));
    // flock conflicts between open file descriptions, also within one process,
    // which stands in here for a second run.
    try {
      bosch::io::FileLock second(path, "checkpoint 'out.checkpoint'");
      FAIL("a second lock on a held file was granted");
    } catch (const bosch::file_error& e) {
      CHECK(e.where() == path.string());
      CHECK(std::string(e.what()).find("checkpoint 'out.checkpoint' is in use by another process") !=
            std::string::npos);
    }
    first.release();
    CHECK(fs::exists(path));  // released, file kept
    bosch::io::FileLock third(path, "x");  // free again
    third.release(/*remove_file=*/true);
    CHECK_FALSE(fs::exists(path));
  }
  // Destruction releases too.
  { bosch::io::FileLock a(path, "x"); }
  { bosch::io::FileLock b(path, "x"); }
  // A lock file that cannot be created is a file error naming it.
  CHECK_THROWS_AS(bosch::io::FileLock(dir / "missing" / "x.lock", "x"), bosch::file_error);
  fs::remove_all(dir);
}
