// io::write_file_atomic, check_output_file and read_file on paths that are not
// plain files: symbolic links are written through, devices and FIFOs in
// place, directories and sockets refused, nothing ever replaced that is not a
// regular file, and no temporary file left behind.
#include <doctest/doctest.h>

#include <bosch/error.hpp>
#include <bosch/io/atomic_file.hpp>

#include <filesystem>
#include <string>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

struct Dir {
  fs::path path = fs::temp_directory_path() / ("bosch_test_atomic_" + std::to_string(::getpid()));
  Dir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::size_t entries() const {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::recursive_directory_iterator(path)) ++n;
    return n;
  }
};

}  // namespace

TEST_CASE("write_file_atomic follows symbolic links, keeps the link and the file's permissions") {
  Dir d;
  fs::create_directory(d.path / "sub");
  fs::create_symlink("sub/t.txt", d.path / "link.txt");  // dangling at first
  bosch::io::write_file_atomic(d.path / "link.txt", "one");
  CHECK(fs::is_symlink(d.path / "link.txt"));
  CHECK(bosch::io::read_file(d.path / "sub" / "t.txt") == "one");
  fs::permissions(d.path / "sub" / "t.txt", fs::perms::owner_read | fs::perms::owner_write);
  bosch::io::write_file_atomic(d.path / "link.txt", "two");
  CHECK(bosch::io::read_file(d.path / "link.txt") == "two");
  CHECK(fs::is_symlink(d.path / "link.txt"));
  CHECK((fs::status(d.path / "sub" / "t.txt").permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write));
  CHECK(d.entries() == 3);  // sub, sub/t.txt, link.txt: no temporary or probe file
  // A loop of links is an error, not a hang.
  fs::create_symlink("b", d.path / "a");
  fs::create_symlink("a", d.path / "b");
  CHECK_THROWS_WITH_AS(bosch::io::write_file_atomic(d.path / "a", "x"),
                       doctest::Contains("too many levels of symbolic links"), bosch::file_error);
}

TEST_CASE("devices and FIFOs are written in place; directories and sockets are refused, never replaced") {
  Dir d;
  CHECK(bosch::io::check_output_file("/dev/null") == bosch::io::WriteMode::in_place);
  bosch::io::write_file_atomic("/dev/null", "discarded");
  CHECK(fs::is_character_file("/dev/null"));
  REQUIRE(::mkfifo((d.path / "fifo").c_str(), 0600) == 0);
  CHECK(bosch::io::check_output_file(d.path / "fifo") == bosch::io::WriteMode::in_place);

  fs::create_directory(d.path / "dir");
  CHECK_THROWS_WITH_AS(bosch::io::write_file_atomic(d.path / "dir", "x"), doctest::Contains("is a directory"),
                       bosch::file_error);
  CHECK(fs::is_directory(d.path / "dir"));
  CHECK_THROWS_WITH_AS(bosch::io::check_output_file(d.path / "dir", "--out"),
                       doctest::Contains("--out: '"), bosch::file_error);

  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(s >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sp = (d.path / "sock").string();
  REQUIRE(sp.size() < sizeof addr.sun_path);
  std::copy(sp.begin(), sp.end(), addr.sun_path);
  REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  CHECK_THROWS_WITH_AS(bosch::io::write_file_atomic(d.path / "sock", "x"), doctest::Contains("not a regular file"),
                       bosch::file_error);
  CHECK(fs::is_socket(d.path / "sock"));
  ::close(s);
}

TEST_CASE("check_output_file names what is wrong before anything is written") {
  Dir d;
  CHECK_THROWS_WITH_AS(bosch::io::check_output_file("", "--log"), doctest::Contains("--log: '': empty path"),
                       bosch::file_error);
  CHECK_THROWS_WITH_AS(bosch::io::check_output_file(d.path / "no" / "x.json", "--out"),
                       doctest::Contains("does not exist"), bosch::file_error);
  CHECK_THROWS_WITH_AS(bosch::io::check_output_file(d.path / std::string(300, 'n'), "--out"),
                       doctest::Contains("file name too long"), bosch::file_error);
  CHECK_THROWS_WITH_AS(bosch::io::check_output_file("/proc/bosch-test", "--out"),
                       doctest::Contains("cannot create a file in directory '/proc'"), bosch::file_error);
  CHECK(bosch::io::check_output_file(d.path / "ok.json", "--out") == bosch::io::WriteMode::replace);
  CHECK(d.entries() == 0);  // the probe file is gone
}

TEST_CASE("read_file refuses a directory and a missing file by name") {
  Dir d;
  CHECK_THROWS_WITH_AS(bosch::io::read_file(d.path), doctest::Contains("is a directory"), bosch::file_error);
  CHECK_THROWS_WITH_AS(bosch::io::read_file(d.path / "nope"), doctest::Contains("no such file"), bosch::file_error);
}
