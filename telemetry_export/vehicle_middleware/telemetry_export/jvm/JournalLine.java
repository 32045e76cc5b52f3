package vehicle_middleware.telemetry;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.api.java.UDF3;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * One journal line (its bytes) -> the record's struct, for the lines the
 * middleware writes: compact JSON (no whitespace), ASCII, every known field of
 * its schema's type. Returns null for any other line, and the caller then asks
 * Spark's from_json, whose result this equals wherever it returns one.
 *
 * <p>{@link HashChecks}, the second function: whether a line's hash checks, as
 * vehicle_middleware.telemetry_export.transforms.parse_lines defines it, over the bytes without
 * copying them; the length of the line's hash prefix comes as an argument, from
 * vehicle_middleware.contract.journal.chain.HASH_PREFIX_LEN (as the schema comes as a spec).
 *
 * <p>Why: Spark's from_json allocates a character reader per line and looks
 * up the schema's default values per line; this reads the bytes once.
 * Registered by vehicle_middleware.telemetry_export.jvm; the schema comes
 * from vehicle_middleware.telemetry_export.schema as a spec, "name:type,..." with types s (string),
 * l (long), i (int), b (boolean) and a-prefixed arrays of them (e.g. "al").
 */
public final class JournalLine implements UDF2<byte[], String, Row> {
  private static final long serialVersionUID = 1L;

  private transient String spec;
  /** Open addressing by a name's hash (String.hashCode of its bytes): the field's index, or -1. */
  private transient int[] slots;
  private transient byte[][] names;
  private transient char[] types;
  private transient char[] elements;

  @Override
  public Row call(byte[] line, String schema) {
    if (line == null) {
      return null;
    }
    if (!schema.equals(spec)) {
      load(schema);
    }
    try {
      Object[] values = new Object[types.length];
      return new Parser(line).record(values) ? RowFactory.create(values) : null;
    } catch (NotCanonical e) {
      return null;
    }
  }

  /**
   * (line, its hash field, the hash prefix's length P in characters) -> whether
   * SHA-256 over "{" and the line from its (P + 1)th character, in lower-case
   * hex, is the hash field (null without one): parse_lines'
   * sha2(concat('{', substring(value, P + 1))) = hash, without the copies.
   */
  public static final class HashChecks implements UDF3<byte[], String, Integer, Boolean> {
    private static final long serialVersionUID = 1L;
    private static final byte[] HEX = "0123456789abcdef".getBytes(StandardCharsets.ISO_8859_1);
    private transient MessageDigest sha256;

    @Override
    public Boolean call(byte[] line, String hash, Integer prefix) throws NoSuchAlgorithmException {
      if (line == null || hash == null || prefix == null) {
        return null;
      }
      if (sha256 == null) {
        sha256 = MessageDigest.getInstance("SHA-256");
      }
      sha256.reset();
      sha256.update((byte) '{');
      int body = skipCharacters(line, prefix);
      sha256.update(line, body, line.length - body);
      byte[] digest = sha256.digest();
      if (hash.length() != 2 * digest.length) {
        return false;
      }
      for (int k = 0; k < digest.length; k++) {
        if (hash.charAt(2 * k) != HEX[(digest[k] >> 4) & 0xf]
            || hash.charAt(2 * k + 1) != HEX[digest[k] & 0xf]) {
          return false;
        }
      }
      return true;
    }

    /** The byte where character n starts, counted as Spark's UTF8String counts them. */
    private static int skipCharacters(byte[] b, int n) {
      int i = 0;
      for (int c = 0; c < n && i < b.length; c++) {
        i += UTF8String.numBytesForFirstByte(b[i]);
      }
      return Math.min(i, b.length);
    }
  }

  private void load(String schema) {
    String[] fields = schema.split(",");
    int size = Integer.highestOneBit(4 * fields.length) * 2;
    slots = new int[size];
    Arrays.fill(slots, -1);
    names = new byte[fields.length][];
    types = new char[fields.length];
    elements = new char[fields.length];
    for (int i = 0; i < fields.length; i++) {
      String[] f = fields[i].split(":");
      names[i] = f[0].getBytes(StandardCharsets.ISO_8859_1);
      int s = f[0].hashCode() & (size - 1);
      while (slots[s] >= 0) {
        s = (s + 1) & (size - 1);
      }
      slots[s] = i;
      String t = f[1];
      types[i] = t.charAt(0);
      elements[i] = t.length() > 1 ? t.charAt(1) : ' ';
    }
    spec = schema;
  }

  /** Not a line this reads: from_json decides. No stack trace (it is not an error). */
  private static final class NotCanonical extends RuntimeException {
    private static final long serialVersionUID = 1L;
    static final NotCanonical INSTANCE = new NotCanonical();

    private NotCanonical() {
      super(null, null, false, false);
    }
  }

  private final class Parser {
    private final byte[] b;
    private int i;

    Parser(byte[] bytes) {
      b = bytes;
    }

    private int peek() {
      if (i >= b.length) {
        throw NotCanonical.INSTANCE;
      }
      return b[i];
    }

    private void expect(int c) {
      if (peek() != c) {
        throw NotCanonical.INSTANCE;
      }
      i++;
    }

    boolean record(Object[] values) {
      expect('{');
      if (peek() == '}') {
        i++;
        return i == b.length;
      }
      while (true) {
        int at = field();
        expect(':');
        if (at < 0) {
          skip();
        } else {
          values[at] = value(types[at], elements[at]);
        }
        int c = peek();
        i++;
        if (c == '}') {
          return i == b.length;
        }
        if (c != ',') {
          throw NotCanonical.INSTANCE;
        }
      }
    }

    /** A key, skipped; its start in b (its end is i - 1). */
    private int key() {
      expect('"');
      int start = i;
      while (peek() != '"') {
        int c = b[i];
        if (c == '\\' || c < 0x20 || c >= 0x7f) {
          throw NotCanonical.INSTANCE;
        }
        i++;
      }
      i++;
      return start;
    }

    /** A key: the index of the schema's field of that name, or -1. No copy of it. */
    private int field() {
      int start = key();
      int end = i - 1;
      int h = 0;
      for (int k = start; k < end; k++) {
        h = 31 * h + b[k];
      }
      int mask = slots.length - 1;
      for (int s = h & mask; slots[s] >= 0; s = (s + 1) & mask) {
        byte[] name = names[slots[s]];
        if (Arrays.equals(name, 0, name.length, b, start, end)) {
          return slots[s];
        }
      }
      return -1;
    }

    /** A value of a known field: null, or exactly its type (else from_json decides). */
    private Object value(char type, char element) {
      if (peek() == 'n') {
        literal("null");
        return null;
      }
      switch (type) {
        case 's':
          return string();
        case 'l':
          return integer();
        case 'i':
          long v = integer();
          if (v != (int) v) {
            throw NotCanonical.INSTANCE;
          }
          return (int) v;
        case 'b':
          return bool();
        case 'a':
          return array(element);
        default:
          throw NotCanonical.INSTANCE;
      }
    }

    private Object[] array(char element) {
      expect('[');
      List<Object> out = new ArrayList<>();
      if (peek() == ']') {
        i++;
        return out.toArray();
      }
      while (true) {
        out.add(value(element, ' '));
        int c = peek();
        i++;
        if (c == ']') {
          return out.toArray();
        }
        if (c != ',') {
          throw NotCanonical.INSTANCE;
        }
      }
    }

    /** A string, as Spark holds one (the row converter takes it as it is). */
    private UTF8String string() {
      expect('"');
      int start = i;
      StringBuilder escaped = null;
      while (true) {
        int c = peek();
        if (c == '"') {
          break;
        }
        if (c < 0x20 || c >= 0x7f) {
          throw NotCanonical.INSTANCE; // control characters, and non-ASCII: from_json's
        }
        if (c == '\\') {
          if (escaped == null) {
            escaped = new StringBuilder();
          }
          escaped.append(new String(b, start, i - start, StandardCharsets.ISO_8859_1));
          i++;
          escaped.append(escape());
          start = i;
        } else {
          i++;
        }
      }
      if (escaped == null) {
        i++;
        return UTF8String.fromBytes(Arrays.copyOfRange(b, start, i - 1));
      }
      escaped.append(new String(b, start, i - start, StandardCharsets.ISO_8859_1));
      i++;
      return UTF8String.fromString(escaped.toString());
    }

    private char escape() {
      int c = peek();
      i++;
      switch (c) {
        case '"':
          return '"';
        case '\\':
          return '\\';
        case '/':
          return '/';
        case 'b':
          return '\b';
        case 'f':
          return '\f';
        case 'n':
          return '\n';
        case 'r':
          return '\r';
        case 't':
          return '\t';
        case 'u':
          if (i + 4 > b.length) {
            throw NotCanonical.INSTANCE;
          }
          int v = 0;
          for (int k = 0; k < 4; k++) {
            int d = Character.digit(b[i + k], 16);
            if (d < 0) {
              throw NotCanonical.INSTANCE;
            }
            v = v * 16 + d;
          }
          i += 4;
          if (Character.isSurrogate((char) v)) {
            throw NotCanonical.INSTANCE; // pairs and lone halves: from_json's
          }
          return (char) v;
        default:
          throw NotCanonical.INSTANCE;
      }
    }

    /** -?(0|[1-9][0-9]*) that fits a long, followed by neither a fraction nor an exponent. */
    private long integer() {
      boolean negative = false;
      if (peek() == '-') {
        negative = true;
        i++;
      }
      int start = i;
      long v = 0;
      while (i < b.length && b[i] >= '0' && b[i] <= '9') {
        int d = b[i] - '0';
        // Up to 18 digits always fit; past them, check before each step.
        if (i - start >= 18 && v < (Long.MIN_VALUE + d) / 10) {
          throw NotCanonical.INSTANCE; // beyond a long
        }
        v = v * 10 - d; // negative, so that Long.MIN_VALUE fits
        i++;
      }
      int digits = i - start;
      if (digits == 0 || (digits > 1 && b[start] == '0')) {
        throw NotCanonical.INSTANCE;
      }
      if (i < b.length && (b[i] == '.' || b[i] == 'e' || b[i] == 'E')) {
        throw NotCanonical.INSTANCE;
      }
      if (negative) {
        return v;
      }
      if (v == Long.MIN_VALUE) {
        throw NotCanonical.INSTANCE;
      }
      return -v;
    }

    private Boolean bool() {
      if (peek() == 't') {
        literal("true");
        return Boolean.TRUE;
      }
      literal("false");
      return Boolean.FALSE;
    }

    private void literal(String word) {
      for (int k = 0; k < word.length(); k++) {
        expect(word.charAt(k));
      }
    }

    /** Any JSON value of a field the schema does not have (only its syntax matters). */
    private void skip() {
      int c = peek();
      if (c == '"') {
        string();
      } else if (c == '{' || c == '[') {
        int close = c == '{' ? '}' : ']';
        i++;
        if (peek() == close) {
          i++;
          return;
        }
        while (true) {
          if (c == '{') {
            key();
            expect(':');
          }
          skip();
          int d = peek();
          i++;
          if (d == close) {
            return;
          }
          if (d != ',') {
            throw NotCanonical.INSTANCE;
          }
        }
      } else if (c == 't') {
        literal("true");
      } else if (c == 'f') {
        literal("false");
      } else if (c == 'n') {
        literal("null");
      } else {
        number();
      }
    }

    /** -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, as JSON has it. */
    private void number() {
      if (peek() == '-') {
        i++;
      }
      if (peek() == '0') {
        i++;
      } else if (digits() == 0) {
        throw NotCanonical.INSTANCE;
      }
      if (i < b.length && b[i] == '.') {
        i++;
        if (digits() == 0) {
          throw NotCanonical.INSTANCE;
        }
      }
      if (i < b.length && (b[i] == 'e' || b[i] == 'E')) {
        i++;
        if (i < b.length && (b[i] == '+' || b[i] == '-')) {
          i++;
        }
        if (digits() == 0) {
          throw NotCanonical.INSTANCE;
        }
      }
    }

    private int digits() {
      int start = i;
      while (i < b.length && b[i] >= '0' && b[i] <= '9') {
        i++;
      }
      return i - start;
    }
  }
}
