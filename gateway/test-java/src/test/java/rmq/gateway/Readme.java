package rmq.gateway;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** The README's examples are the tested ones: the lines between a test's README markers. */
final class Readme {
    private Readme() {}

    /** The lines between `README:<tag> begin` and `... end` in `source`, de-indented. */
    static List<String> snippet(String tag, Path source) throws IOException {
        List<String> lines = Files.readAllLines(source);
        int begin = -1;
        int end = -1;
        for (int i = 0; i < lines.size(); i++) {
            if (lines.get(i).trim().equals("// README:" + tag + " begin")) {
                begin = i + 1;
            } else if (lines.get(i).trim().equals("// README:" + tag + " end")) {
                end = i;
            }
        }
        if (begin < 0 || end < begin) {
            throw new IllegalStateException("no README:" + tag + " markers in " + source);
        }
        int indent = lines.get(begin).length() - lines.get(begin).stripLeading().length();
        List<String> out = new ArrayList<>();
        for (String l : lines.subList(begin, end)) {
            out.add(l.length() >= indent ? l.substring(indent) : l.strip());
        }
        return out;
    }

    /** Whether docs/gateway.md (the gateway's guide) holds the snippet as consecutive lines. */
    static boolean contains(String tag, Path source) throws IOException {
        Path repo = Path.of(System.getProperty("rmq.repo", "../.."));
        List<String> readme = Files.readAllLines(repo.resolve("docs/gateway.md"));
        List<String> want = snippet(tag, source);
        for (int i = 0; i + want.size() <= readme.size(); i++) {
            if (readme.subList(i, i + want.size()).equals(want)) {
                return true;
            }
        }
        return false;
    }
}
